"""The run pages: the list with filters and short-id search, the read-only run page, and
*Retry* and *Cancel* (buttons and list actions)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django_celery_results.models import TaskResult

from .. import selectors, services
from ..models import (
    CANCELLABLE_RUN_STATUSES,
    RETRYABLE_RUN_STATUSES,
    HoldReason,
    Run,
    RunStatus,
)
from ..selectors.paging import BoundedPaginator
from ..services import permissions
from ..vocabulary import secret_fields
from . import attempts as attempts_view
from .buttons import button_paths
from .lists import SelectionCheckbox, task_column_filter
from .views import badge, duration, instant


def _uuid_range(text: str) -> tuple[uuid.UUID, uuid.UUID] | None:
    """'3f2a9c1e' (the short id the lists show) → the UUID range it prefixes."""
    hex_digits = text.replace("-", "").lower()
    if not 4 <= len(hex_digits) <= 32 or any(c not in "0123456789abcdef" for c in hex_digits):
        return None
    return (uuid.UUID(hex_digits.ljust(32, "0")), uuid.UUID(hex_digits.ljust(32, "f")))


@admin.register(Run)
class RunAdmin(SelectionCheckbox, admin.ModelAdmin):
    change_form_template = "admin/tasks_app/run/change_form.html"
    list_display = (
        "short_id",
        "task_link",
        "status_badge",
        "trigger_attempt",
        "due",
        "started",
        "lateness",
        "duration",
        "worker_name",
    )
    list_filter = (
        "status",
        task_column_filter("action", lookup="task__action"),
        "trigger",
        task_column_filter("queue", lookup="task__queue", parameter="queue"),
        ("due_at", admin.DateFieldListFilter),
    )
    search_fields = ("=task__id",)
    search_help_text = "A task id, a run id, or the first characters of a run id."
    list_select_related = ("task",)
    show_full_result_count = False
    paginator = BoundedPaginator  # no COUNT(*) over the whole history (selectors/paging.py)
    actions = ("cancel", "retry")
    fields = (
        "id",
        "task_link",
        "run_status",
        "outcome",
        "trigger",
        "requested_by",
        "unique_key",
        "made_with_action",
        "call",
        "queue_and_priority",
        "attempt",
        "attempts",
        "interruptions",
        "scheduled_for_time",
        "due",
        "expires",
        "created",
        "queued",
        "started",
        "finished",
        "cancel_requested",
        "flow_control",
        "lateness",
        "duration",
        "worker",
        "output_block",
        "error_block",
        "result",
        "celery_result",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Run], search_term: str
    ) -> tuple[QuerySet[Run], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        match = Q(task__id=term)
        prefix = _uuid_range(term)
        if prefix is not None:
            match |= Q(id__range=prefix)
        return queryset.filter(match), False

    @admin.display(description="run")
    def short_id(self, run: Run) -> str:
        return str(run.id)[:8]

    @admin.display(description="status", ordering="status")
    def status_badge(self, run: Run) -> SafeString:
        return badge(run.status)

    @admin.display(description="lateness", ordering="lateness_ms")
    def lateness(self, run: Run) -> str:
        return duration(run.lateness_ms)

    @admin.display(description="duration")
    def duration(self, run: Run) -> str:
        return duration(run.duration_ms)

    @admin.display(description="trigger", ordering="trigger")
    def trigger_attempt(self, run: Run) -> str:
        """One column for both, so the list fits 1,400 px: ``schedule``, ``retry · attempt 2``."""
        return run.trigger if run.attempt <= 1 else f"{run.trigger} · attempt {run.attempt}"

    @admin.display(description="scheduled for")
    def scheduled_for_time(self, run: Run) -> SafeString | str:
        return instant(run.scheduled_for)

    @admin.display(description="due", ordering="due_at")
    def due(self, run: Run) -> SafeString | str:
        return instant(run.due_at)

    @admin.display(description="expires")
    def expires(self, run: Run) -> SafeString | str:
        return instant(run.expires_at, empty="never")

    @admin.display(description="created")
    def created(self, run: Run) -> SafeString | str:
        return instant(run.created_at)

    @admin.display(description="queued")
    def queued(self, run: Run) -> SafeString | str:
        return instant(run.queued_at)

    @admin.display(description="started", ordering="started_at")
    def started(self, run: Run) -> SafeString | str:
        return instant(run.started_at)

    @admin.display(description="finished")
    def finished(self, run: Run) -> SafeString | str:
        return instant(run.finished_at)

    @admin.display(description="cancel requested")
    def cancel_requested(self, run: Run) -> SafeString | str:
        return instant(run.cancel_requested_at)

    @admin.display(description="flow control")
    def flow_control(self, run: Run) -> SafeString | str:
        """Why it waits (held by its task's flow control) and its key."""
        parts: list[SafeString | str] = []
        if run.held == HoldReason.RATE:
            parts.append(format_html("waiting for its reserved start {}", instant(run.not_before)))
        elif run.held:
            parts.append("waiting for a free slot (concurrency limit)")
        if run.flow_key:
            parts.append(format_html("key {}", run.flow_key))
        return format_html_join("; ", "{}", ((p,) for p in parts)) if parts else "-"

    @admin.display(description="worker", ordering="worker")
    def worker_name(self, run: Run) -> SafeString | str:
        if not run.worker:
            return "-"
        # Celery names workers ``name@host``: the host is what tells them apart at a glance.
        return format_html(
            '<span class="tasks-clip" title="{}">{}</span>',
            run.worker,
            run.worker.rpartition("@")[2],
        )

    @admin.display(description="task", ordering="task__id")
    def task_link(self, run: Run) -> SafeString:
        return format_html(
            "<a class='tasks-clip' href='{}' title='{}'>{}</a>",
            reverse("admin:tasks_app_task_change", args=[run.task_id]),
            run.task_id,
            run.task_id,
        )

    @admin.display(description="status")
    def run_status(self, run: Run) -> SafeString:
        return attempts_view.status_block(run, self.run_outcome(run))

    @admin.display(description="outcome")
    def outcome(self, run: Run) -> SafeString:
        return attempts_view.outcome_block(self.run_outcome(run))

    @admin.display(description="attempts")
    def attempts(self, run: Run) -> SafeString:
        return attempts_view.attempts_table(run, self.run_outcome(run))

    @staticmethod
    def run_outcome(run: Run) -> selectors.RunOutcome:
        """Read once per page (the outcome and attempts fields share it)."""
        cached: selectors.RunOutcome | None = getattr(run, "_outcome", None)
        if cached is None:
            cached = selectors.run_outcome(run=run)
            run._outcome = cached  # type: ignore[attr-defined]
        return cached

    @admin.display(description="output")
    def output_block(self, run: Run) -> SafeString:
        note = (
            format_html(
                "<p class='tasks-truncated'>{}</p>",
                "Truncated: only the first 64 KiB of the output were kept.",
            )
            if run.truncated
            else ""
        )
        return format_html(
            "<pre class='tasks-output'>{}</pre>{}", run.output or "(no output)", note
        )

    @admin.display(description="action")
    def made_with_action(self, run: Run) -> str:
        """The action the run was made with: its payload's secrets are masked by it."""
        return run.made_with

    @admin.display(description="payload")
    def call(self, run: Run) -> SafeString:
        """The run's own payload (a call enqueued from code, a run now with other arguments),
        secret fields masked; else it runs with its task's."""
        if run.payload is None:
            return format_html("<span class='tasks-muted'>{}</span>", "the task's")
        shown = secret_fields.payload_masked(run.made_with, run.payload)
        return format_html("<pre class='tasks-output'>{}</pre>", json.dumps(shown, indent=2))

    @admin.display(description="queue / priority")
    def queue_and_priority(self, run: Run) -> str:
        return f"{run.queue_name} / {run.priority_level}"

    @admin.display(description="error and traceback")
    def error_block(self, run: Run) -> SafeString:
        if not run.error:
            return format_html("<span class='tasks-muted'>{}</span>", "none")
        return format_html("<pre class='tasks-output tasks-error'>{}</pre>", run.error)

    @admin.display(description="Celery result")
    def celery_result(self, run: Run) -> SafeString | str:
        result = TaskResult.objects.filter(task_id=str(run.id)).first()
        if result is None:
            return "none: Celery stores a result only when the task itself errs; the outcome is on this run"
        return format_html(
            "<table class='tasks-kv'><tr><th>state</th><td>{}</td></tr><tr><th>worker</th><td>{}</td></tr>"
            "<tr><th>done</th><td>{}</td></tr><tr><th>result</th><td><pre class='tasks-output'>{}</pre></td></tr>"
            "{}</table>",
            result.status,
            result.worker or "-",
            instant(result.date_done),
            result.result or "",
            format_html(
                "<tr><th>traceback</th><td><pre class='tasks-output'>{}</pre></td></tr>",
                result.traceback,
            )
            if result.traceback
            else "",
        )

    # --- who may do what: Django's hooks, answered by the one table -----------------------

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return permissions.allows(request.user, "runs")

    def has_cancel_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return permissions.allows(request.user, "cancel")

    def has_retry_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return permissions.allows(request.user, "retry")

    # --- buttons and actions ---------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        buttons = {"cancel": self.cancel_view, "retry": self.retry_view}
        return button_paths(self.admin_site, "run", buttons) + super().get_urls()

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return self._button(request, object_id, services.run_cancel, "cancelled")

    def retry_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return self._button(request, object_id, services.run_retry, "retried")

    def _button(
        self, request: HttpRequest, object_id: str, service: Callable[..., Run], verb: str
    ) -> HttpResponse:
        """``service`` on one run, for a user who may see it; the service decides the rest."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        run = get_object_or_404(Run.objects.select_related("task"), pk=object_id)
        target = run
        try:
            target = service(run=run, by=request.user)
            if target.status == RunStatus.RUNNING:  # a running run cancelled: asked to stop
                verb = "asked to stop (it ends cancelled)"
            self.message_user(request, f"Run {str(run.pk)[:8]} {verb}.", messages.SUCCESS)
        except services.ConflictError as exc:
            self.message_user(request, str(exc), messages.WARNING)
        except PermissionDenied as exc:
            self.message_user(request, f"Run {str(run.pk)[:8]} refused: {exc}.", messages.ERROR)
        return HttpResponseRedirect(reverse("admin:tasks_app_run_change", args=[target.pk]))

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Run | None:
        """The run as read with its attempts (``RunOutcome.current``), so that its status,
        its buttons and its outcome on the page agree: read apart, a run that ended in
        between showed ``running`` (and *Cancel*) beside its outcome."""
        run = super().get_object(request, object_id, from_field)
        if run is None:
            return None
        try:
            outcome = selectors.run_outcome(run=run)
        except Run.DoesNotExist:  # deleted with its task since
            return None
        current = outcome.current(run)
        current._outcome = outcome  # type: ignore[attr-defined]
        return current

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Run | None = None,
    ) -> Any:
        if obj is not None:
            # Runs are read-only here: the page is the run, not a form to change it.
            context["title"] = f"Run {str(obj.pk)[:8]} of task {obj.task_id}"
            context["can_cancel"] = obj.status in CANCELLABLE_RUN_STATUSES and (
                self.has_cancel_permission(request)
            )
            context["can_retry"] = obj.status in RETRYABLE_RUN_STATUSES and (
                self.has_retry_permission(request)
            )
        return super().render_change_form(request, context, add, change, form_url, obj)

    @admin.action(
        description="Cancel (pending or queued runs; running ones are asked to stop)",
        permissions=["cancel"],
    )
    def cancel(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        self._each(request, queryset, services.run_cancel, "cancelled", CANCELLABLE_RUN_STATUSES)

    @admin.action(description="Retry (failed, expired or cancelled runs)", permissions=["retry"])
    def retry(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        self._each(request, queryset, services.run_retry, "retried", RETRYABLE_RUN_STATUSES)

    def _each(
        self,
        request: HttpRequest,
        queryset: QuerySet[Run],
        service: Callable[..., Run],
        verb: str,
        offered: frozenset[str],
    ) -> None:
        """Apply ``service`` to the selected runs in ``offered`` statuses; the others are
        counted and left alone, and the service's own refusal (a race, a permission) is
        reported."""
        done, left = 0, 0
        for run in queryset.select_related("task"):
            if run.status not in offered:
                left += 1
                continue
            try:
                service(run=run, by=request.user)
                done += 1
            except services.ConflictError as exc:
                self.message_user(request, str(exc), messages.WARNING)
            except PermissionDenied as exc:
                self.message_user(request, f"Run {str(run.pk)[:8]} refused: {exc}.", messages.ERROR)
        self.message_user(request, f"{done} run(s) {verb}.", messages.SUCCESS)
        if left:
            self.message_user(
                request,
                f"{left} run(s) left alone: only {', '.join(sorted(offered))} runs can be {verb}.",
                messages.WARNING,
            )
