"""Django admin: the operator's cockpit.

- **Task page**: the schedule edited in place (kind, interval or cron with its time zone,
  policies), the schedule in words and its next five fires (server-side on load, live from
  ``preview/`` as you type), status and next run, the last runs with status badges, and the
  buttons *Run now*, *Pause* (with a note), *Resume*, *Duplicate*.
- **Run list**: filters, search by task id or run id (full or the 8-character short id),
  columns for due, started, lateness, duration, attempt; the run page shows output, error,
  the Celery result and the neighbouring attempts, with *Retry* and *Cancel*.
- **Overview** (``/admin/overview/``, linked from the index): see ``admin_views``.

Saves, buttons and actions go through ``tasks_app.services``; the admin holds no rules of its
own, and service validation errors are shown next to their field (``Task.clean``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.views.decorators.http import require_POST
from django_celery_results.models import TaskResult

from . import actions, admin_views, scheduling, services, validation
from .admin_views import badge
from .models import Run, RunStatus, Task, TaskAuditEntry, Trigger
from .services.tasks import EXECUTION_FIELDS, POLICY_FIELDS

RECENT_RUNS = 10
AUDIT_ENTRIES = 20
DUPLICATE_SUFFIX = "-copy"


class TaskForm(forms.ModelForm):
    delay_seconds = forms.FloatField(
        required=False,
        label="Run once after (seconds)",
        help_text="Optional: on save, also schedule one run this many seconds from now.",
    )

    class Meta:
        model = Task
        fields = ("id", *services.TASK_FIELDS)
        widgets = {
            "action": forms.TextInput(attrs={"list": "tasks-actions", "autocomplete": "off"}),
            "timezone": forms.TextInput(attrs={"list": "tasks-zones", "autocomplete": "off"}),
            "cron": forms.TextInput(
                attrs={"size": 30, "class": "tasks-mono", "placeholder": "*/5 * * * *"}
            ),
            "payload": forms.Textarea(attrs={"rows": 4, "cols": 60, "class": "tasks-mono"}),
        }

    def clean_delay_seconds(self) -> float | None:
        value = self.cleaned_data.get("delay_seconds")
        if value is None:
            return None
        try:
            validation.check_delay(value)
        except ValidationError as exc:
            raise ValidationError(exc.message_dict["delay_seconds"]) from exc
        return value


def _user(request: HttpRequest) -> str:
    return request.user.get_username() if request.user.is_authenticated else ""


def _ms(value: float | int | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.2f} s" if abs(value) >= 10_000 else f"{value:.0f} ms"


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    form = TaskForm
    change_form_template = "admin/tasks_app/task/change_form.html"
    list_display = ("id", "name", "action", "schedule", "status_badge", "paused", "next_run_at")
    list_filter = ("status", "action", "schedule_type", "paused", "queue")
    search_fields = ("id", "name")
    readonly_fields = (
        "status_badge",
        "next_run_at",
        "paused",
        "pause_note",
        "paused_at",
        "paused_by",
        "alarm",
        "fire_count",
        "consecutive_failures",
        "created_at",
        "updated_at",
        "schedule_preview",
        "recent_runs",
        "audit_trail",
    )
    fieldsets = (
        (None, {"fields": ("id", "name", "description", "action", "payload")}),
        (
            "Schedule",
            {
                "fields": (
                    "schedule_type",
                    "run_at",
                    "interval_seconds",
                    "cron",
                    "timezone",
                    "schedule_preview",
                    "delay_seconds",
                )
            },
        ),
        (
            "Policies",
            {
                "classes": ("collapse",),
                "fields": POLICY_FIELDS,
            },
        ),
        (
            "Execution",
            {
                "classes": ("collapse",),
                "fields": EXECUTION_FIELDS,
            },
        ),
        (
            "State",
            {
                "fields": (
                    "status_badge",
                    "next_run_at",
                    "alarm",
                    "paused",
                    "pause_note",
                    "paused_at",
                    "paused_by",
                    "fire_count",
                    "consecutive_failures",
                    "created_at",
                    "updated_at",
                )
            },
        ),
        ("Last runs", {"fields": ("recent_runs",)}),
        ("Audit trail", {"classes": ("collapse",), "fields": ("audit_trail",)}),
    )
    actions = ("run_now", "pause", "resume")

    class Media:
        css = {"all": ("tasks_app/admin.css",)}
        js = ("tasks_app/task_preview.js",)

    def get_readonly_fields(self, request: HttpRequest, obj: Task | None = None) -> Any:
        fields = super().get_readonly_fields(request, obj)
        return (*fields, "id") if obj else fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Task]:
        return super().get_queryset(request).select_related("periodic_task")

    # --- columns and read-only fields ------------------------------------------------------

    @admin.display(description="schedule")
    def schedule(self, task: Task) -> str:
        if task.schedule_type == "interval":
            return f"every {task.interval_seconds} s"
        if task.schedule_type == "cron":
            return f"cron {task.cron} ({task.timezone})"
        if task.schedule_type == "once":
            return f"once at {task.run_at:%Y-%m-%d %H:%M:%S %Z}" if task.run_at else "once"
        return "on demand"

    @admin.display(description="status", ordering="status")
    def status_badge(self, task: Task) -> SafeString:
        return badge(task.status)

    @admin.display(description="missed-run alarm")
    def alarm(self, task: Task) -> SafeString | str:
        if task.alarm_since is None:
            return "-"
        return format_html(
            '<strong class="tasks-alarm">since {:%Y-%m-%d %H:%M:%S} UTC</strong> {}',
            task.alarm_since,
            task.alarm_note,
        )

    @admin.display(description="in words and next fires")
    def schedule_preview(self, task: Task) -> SafeString:
        try:
            data = admin_views.preview_of(task)
        except (scheduling.CronError, scheduling.ZoneError, ValueError) as exc:
            data = {"description": f"cannot preview: {exc}", "fires": []}
        rows = format_html_join(
            "",
            "<li><span class='tasks-mono'>{}</span> <span class='tasks-muted'>{}</span></li>",
            (
                (f["local_text"], f["utc_text"] if f["local_text"] != f["utc_text"] else "")
                for f in data["fires"]
            ),
        )
        return format_html(
            '<div id="schedule-preview" data-url="{}"><p class="tasks-words">{}</p>'
            '<ol class="tasks-fires">{}</ol><p class="tasks-preview-error errornote" hidden></p></div>',
            reverse("admin:tasks_app_task_preview"),
            data["description"],
            rows or format_html("<li class='tasks-muted'>{}</li>", "no upcoming fire"),
        )

    @admin.display(description="changes")
    def audit_trail(self, task: Task) -> SafeString | str:
        if task._state.adding:
            return "-"
        entries = list(TaskAuditEntry.objects.filter(task_id=task.pk)[:AUDIT_ENTRIES])
        if not entries:
            return "no changes recorded"
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class='tasks-mono'>{}</td></tr>",
            (
                (
                    f"{e.at:%Y-%m-%d %H:%M:%S}",
                    e.by or "-",
                    e.event,
                    "; ".join(f"{k}: {v[0]!r} → {v[1]!r}" for k, v in e.changes.items())
                    if e.event == "updated"
                    else e.note,
                )
                for e in entries
            ),
        )
        return format_html(
            "<table class='tasks-runs'><thead><tr><th>when (UTC)</th><th>who</th><th>what</th>"
            "<th>from → to / note</th></tr></thead><tbody>{}</tbody></table>",
            rows,
        )

    @admin.display(description="last runs")
    def recent_runs(self, task: Task) -> SafeString | str:
        if task._state.adding:
            return "-"
        runs = list(task.runs.order_by("-due_at")[:RECENT_RUNS])
        if not runs:
            return "no runs yet"
        rows = format_html_join(
            "",
            "<tr><td><a class='tasks-mono' href='{}'>{}</a></td><td>{}</td><td>{}</td><td>{}</td>"
            "<td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    reverse("admin:tasks_app_run_change", args=[r.pk]),
                    str(r.pk)[:8],
                    badge(r.status),
                    r.trigger,
                    r.attempt,
                    f"{r.due_at:%Y-%m-%d %H:%M:%S}",
                    _ms(r.lateness_ms),
                    _ms(r.duration_ms),
                )
                for r in runs
            ),
        )
        more = reverse("admin:tasks_app_run_changelist") + f"?task__id__exact={task.pk}"
        return format_html(
            "<table class='tasks-runs'><thead><tr><th>run</th><th>status</th><th>trigger</th>"
            "<th>attempt</th><th>due (UTC)</th><th>lateness</th><th>duration</th></tr></thead>"
            "<tbody>{}</tbody></table><p><a href='{}'>all runs of this task</a></p>",
            rows,
            more,
        )

    # --- saving ----------------------------------------------------------------------------

    def save_model(self, request: HttpRequest, obj: Task, form: Any, change: bool) -> None:
        services.task_save(task=obj, by=_user(request))
        delay = form.cleaned_data.get("delay_seconds")
        if delay is not None:
            run = services.task_schedule_once(task=obj, delay_seconds=delay)
            self.message_user(request, f"Run {run.id} scheduled for {run.due_at:%H:%M:%S} UTC.")

    def delete_model(self, request: HttpRequest, obj: Task) -> None:
        services.task_delete(task=obj, by=_user(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        for task in queryset:
            services.task_delete(task=task, by=_user(request))

    def render_change_form(
        self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any
    ) -> HttpResponse:
        context["action_names"] = [a.name for a in actions.all_actions()]
        context["zone_names"] = sorted(scheduling._zone_names())
        return super().render_change_form(request, context, *args, **kwargs)

    # --- buttons on the task page ----------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        own = [
            path("preview/", wrap(admin_views.preview_view), name="tasks_app_task_preview"),
            path(
                "<path:object_id>/run-now/", wrap(self.run_now_view), name="tasks_app_task_run_now"
            ),
            path("<path:object_id>/pause/", wrap(self.pause_view), name="tasks_app_task_pause"),
            path("<path:object_id>/resume/", wrap(self.resume_view), name="tasks_app_task_resume"),
            path(
                "<path:object_id>/duplicate/",
                wrap(self.duplicate_view),
                name="tasks_app_task_duplicate",
            ),
        ]
        return own + super().get_urls()

    def _task_for_button(self, request: HttpRequest, object_id: str) -> Task:
        task = get_object_or_404(Task, pk=object_id)
        if not self.has_change_permission(request, task):
            raise PermissionDenied
        return task

    def _back(self, task: Task) -> HttpResponseRedirect:
        return HttpResponseRedirect(reverse("admin:tasks_app_task_change", args=[task.pk]))

    def run_now_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return require_POST(self._run_now)(request, object_id)

    def _run_now(self, request: HttpRequest, object_id: str) -> HttpResponse:
        task = self._task_for_button(request, object_id)
        run = services.task_execute(task=task, trigger=Trigger.ADMIN)
        link = reverse("admin:tasks_app_run_change", args=[run.pk])
        self.message_user(
            request, format_html("Run <a href='{}'>{}</a> started.", link, run.pk), messages.SUCCESS
        )
        return self._back(task)

    def pause_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return require_POST(self._pause)(request, object_id)

    def _pause(self, request: HttpRequest, object_id: str) -> HttpResponse:
        task = self._task_for_button(request, object_id)
        note = request.POST.get("note", "").strip()
        if not note:
            self.message_user(
                request,
                "Say why you pause the task (the note is shown on the overview).",
                messages.ERROR,
            )
            return self._back(task)
        services.task_pause(task=task, note=note, by=_user(request))
        self.message_user(request, f"Task {task.pk} paused: {note}", messages.SUCCESS)
        return self._back(task)

    def resume_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return require_POST(self._resume)(request, object_id)

    def _resume(self, request: HttpRequest, object_id: str) -> HttpResponse:
        task = self._task_for_button(request, object_id)
        services.task_resume(task=task, by=_user(request))
        self.message_user(request, f"Task {task.pk} resumed.", messages.SUCCESS)
        return self._back(task)

    def duplicate_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return require_POST(self._duplicate)(request, object_id)

    def _duplicate(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """A copy under a new id. A recurring copy starts paused, so two identical schedules
        never fire side by side before someone has looked at the copy."""
        task = self._task_for_button(request, object_id)
        new_id = _free_id(task.pk)
        fields = {name: getattr(task, name) for name in services.TASK_FIELDS}
        fields["name"] = f"{task.name} (copy)" if task.name else ""
        try:
            with transaction.atomic():
                copy = services.task_create(id=new_id, by=_user(request), **fields)
                if copy.is_recurring:
                    services.task_pause(
                        task=copy,
                        note=f"Duplicate of {task.pk}: review, then resume.",
                        by=_user(request),
                    )
        except (ValidationError, services.ConflictError) as exc:
            text = "; ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)
            self.message_user(request, f"Could not duplicate {task.pk}: {text}", messages.ERROR)
            return self._back(task)
        self.message_user(
            request, f"Task {copy.pk} created as a copy of {task.pk}.", messages.SUCCESS
        )
        return self._back(copy)

    # --- list actions ----------------------------------------------------------------------

    @admin.action(description="Run now", permissions=["change"])
    def run_now(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        for task in queryset:
            services.task_execute(task=task, trigger=Trigger.ADMIN)
        self.message_user(request, f"{queryset.count()} run(s) started.", messages.SUCCESS)

    @admin.action(description="Pause", permissions=["change"])
    def pause(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        for task in queryset:
            services.task_pause(task=task, note="paused from the admin", by=_user(request))
        self.message_user(request, f"{queryset.count()} task(s) paused.", messages.SUCCESS)

    @admin.action(description="Resume", permissions=["change"])
    def resume(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        for task in queryset:
            services.task_resume(task=task, by=_user(request))
        self.message_user(request, f"{queryset.count()} task(s) resumed.", messages.SUCCESS)


def _free_id(base: str) -> str:
    stem = base[: 100 - len(DUPLICATE_SUFFIX) - 4]
    taken = set(
        Task.objects.filter(pk__startswith=f"{stem}{DUPLICATE_SUFFIX}").values_list("pk", flat=True)
    )
    candidate = f"{stem}{DUPLICATE_SUFFIX}"
    n = 2
    while candidate in taken:
        candidate = f"{stem}{DUPLICATE_SUFFIX}-{n}"
        n += 1
    return candidate


class QueueFilter(admin.SimpleListFilter):
    title = "queue"
    parameter_name = "queue"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        queues = Task.objects.order_by("queue").values_list("queue", flat=True).distinct()
        return [(q, q) for q in queues]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Run]) -> QuerySet[Run]:
        return queryset.filter(task__queue=self.value()) if self.value() else queryset


def _uuid_range(text: str) -> tuple[uuid.UUID, uuid.UUID] | None:
    """'3f2a9c1e' (the short id the lists show) → the UUID range it prefixes."""
    hex_digits = text.replace("-", "").lower()
    if not 4 <= len(hex_digits) <= 32 or any(c not in "0123456789abcdef" for c in hex_digits):
        return None
    return (uuid.UUID(hex_digits.ljust(32, "0")), uuid.UUID(hex_digits.ljust(32, "f")))


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    change_form_template = "admin/tasks_app/run/change_form.html"
    list_display = (
        "short_id",
        "task_link",
        "status_badge",
        "trigger",
        "attempt",
        "due_at",
        "started_at",
        "lateness",
        "duration",
        "worker",
    )
    list_filter = (
        "status",
        "task__action",
        "trigger",
        QueueFilter,
        ("due_at", admin.DateFieldListFilter),
    )
    search_fields = ("=task__id",)
    search_help_text = "A task id, a run id, or the first characters of a run id."
    list_select_related = ("task",)
    show_full_result_count = False
    actions = ("cancel", "retry")
    fields = (
        "id",
        "task_link",
        "status_badge",
        "trigger",
        "attempt",
        "attempts",
        "scheduled_for",
        "due_at",
        "expires_at",
        "created_at",
        "queued_at",
        "started_at",
        "finished_at",
        "lateness",
        "duration",
        "worker",
        "output_block",
        "error_block",
        "result",
        "celery_result",
    )
    readonly_fields = fields

    class Media:
        css = {"all": ("tasks_app/admin.css",)}

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
        return _ms(run.lateness_ms)

    @admin.display(description="duration")
    def duration(self, run: Run) -> str:
        return _ms(run.duration_ms)

    @admin.display(description="task", ordering="task__id")
    def task_link(self, run: Run) -> SafeString:
        return format_html(
            "<a href='{}'>{}</a>",
            reverse("admin:tasks_app_task_change", args=[run.task_id]),
            run.task_id,
        )

    @admin.display(description="attempts")
    def attempts(self, run: Run) -> SafeString | str:
        first = run.first_attempt_id or run.id
        chain = (
            Run.objects.filter(Q(pk=first) | Q(first_attempt_id=first))
            .filter(attempt__in=[run.attempt - 1, run.attempt + 1])
            .values_list("pk", "attempt", "status")
        )
        links = {attempt: (pk, status) for pk, attempt, status in chain}
        parts = []
        for label, attempt in (("previous", run.attempt - 1), ("next", run.attempt + 1)):
            if attempt in links:
                pk, status = links[attempt]
                parts.append(
                    format_html(
                        "<a class='tasks-{}-attempt' href='{}'>{} attempt ({}, {})</a>",
                        label,
                        reverse("admin:tasks_app_run_change", args=[pk]),
                        label,
                        attempt,
                        status,
                    )
                )
        return format_html_join(" · ", "{}", ((p,) for p in parts)) if parts else "only attempt"

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
            result.date_done,
            result.result or "",
            format_html(
                "<tr><th>traceback</th><td><pre class='tasks-output'>{}</pre></td></tr>",
                result.traceback,
            )
            if result.traceback
            else "",
        )

    # --- buttons and actions ---------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        own = [
            path("<path:object_id>/cancel/", wrap(self.cancel_view), name="tasks_app_run_cancel"),
            path("<path:object_id>/retry/", wrap(self.retry_view), name="tasks_app_run_retry"),
        ]
        return own + super().get_urls()

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return require_POST(self._button(services.run_cancel, "cancelled"))(request, object_id)

    def retry_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return require_POST(self._button(services.run_retry, "retried"))(request, object_id)

    def _button(self, service: Callable[..., Run], verb: str) -> Callable[..., HttpResponse]:
        def view(request: HttpRequest, object_id: str) -> HttpResponse:
            run = get_object_or_404(Run.objects.select_related("task"), pk=object_id)
            if not self.has_change_permission(request, run):
                raise PermissionDenied
            target = run
            try:
                result = service(run=run)
                target = result
                self.message_user(request, f"Run {str(run.pk)[:8]} {verb}.", messages.SUCCESS)
            except services.ConflictError as exc:
                self.message_user(request, str(exc), messages.WARNING)
            return HttpResponseRedirect(reverse("admin:tasks_app_run_change", args=[target.pk]))

        return view

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> Any:
        extra = dict(extra_context or {})
        if object_id:
            status = Run.objects.filter(pk=object_id).values_list("status", flat=True).first()
            extra["can_cancel"] = status in (RunStatus.PENDING, RunStatus.QUEUED)
            extra["can_retry"] = status in (
                RunStatus.FAILED,
                RunStatus.EXPIRED,
                RunStatus.CANCELLED,
            )
        return super().changeform_view(request, object_id, form_url, extra)

    @admin.action(description="Cancel", permissions=["change"])
    def cancel(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        self._each(request, queryset, services.run_cancel, "cancelled")

    @admin.action(description="Retry", permissions=["change"])
    def retry(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        self._each(request, queryset, services.run_retry, "retried")

    def _each(self, request: HttpRequest, queryset: QuerySet[Run], service: Any, verb: str) -> None:
        done = 0
        for run in queryset.select_related("task"):
            try:
                service(run=run)
                done += 1
            except services.ConflictError as exc:
                self.message_user(request, str(exc), messages.WARNING)
        self.message_user(request, f"{done} run(s) {verb}.", messages.SUCCESS)
