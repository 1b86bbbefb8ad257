"""The task pages: list, form with the schedule in place, and the buttons *Run now*,
*Pause* (with a note), *Resume*, *Duplicate*, and the list actions."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from .. import selectors, services
from ..models import (
    Run,
    Task,
    Trigger,
)
from ..selectors.paging import BoundedPaginator
from ..services import permissions
from ..services.task_operations import EXECUTION_FIELDS, FLOW_FIELDS, POLICY_FIELDS
from ..timing import scheduling
from ..vocabulary import secret_fields, validation
from . import views as admin_views
from .buttons import button_paths
from .forms import TaskForm, action_schemas
from .lists import PausedFilter, SelectionCheckbox, task_column_filter
from .task_columns import TaskColumns
from .views import instant


def _run_link(run: Run, url: str) -> SafeString:
    return format_html("Run <a href='{}'>{}</a>", url, str(run.pk)[:8])


def _run_now_state(run: Run) -> SafeString:
    """What Run now did, as it is: a run is queued (published) or still pending, not started;
    or no new run, the call's unique key being held by a waiting one."""
    if run.deduplicated:
        return format_html("already holds the key {} ({}): no new run.", run.unique_key, run.status)
    if run.status == "queued":
        return format_html("is queued (due {}): a worker starts it next.", instant(run.due_at))
    if run.status == "pending" and run.queue_name in selectors.paused_queues():
        return format_html(
            "is pending: its queue {} is paused; it starts once the queue is resumed.",
            run.queue_name,
        )
    if run.status == "pending":
        return format_html("is pending: it is published when due ({}).", instant(run.due_at))
    return format_html("is {}.", run.status)


def _posted_payload(request: HttpRequest) -> Any:
    """The payload of "Run now with…" (``None``: the plain Run now button)."""
    text = request.POST.get("payload")
    if text is None:
        return None
    return validation.parse_json(text, field="payload")


def _posted_unique(request: HttpRequest) -> dict[str, Any]:
    """The unique key of "Run now with…" (blank fields: not given), as the service takes it
    (it checks and words the rest)."""
    given: dict[str, Any] = {}
    if key := request.POST.get("unique_key", ""):
        given["unique_key"] = key
    if seconds := request.POST.get("unique_for_seconds", "").strip():
        try:
            given["unique_for_seconds"] = int(seconds)
        except ValueError:
            raise ValidationError(
                {"unique_for_seconds": ["must be a whole number of seconds"]}
            ) from None
    if on_duplicate := request.POST.get("on_duplicate", ""):
        given["on_duplicate"] = on_duplicate
    return given


@admin.register(Task)
class TaskAdmin(SelectionCheckbox, TaskColumns, admin.ModelAdmin):
    form = TaskForm
    change_form_template = "admin/tasks_app/task/change_form.html"
    list_display = ("id", "name", "action", "schedule", "status_badge", "next_run_cell", "owner")
    list_filter = (
        "state__status",
        task_column_filter("action", lookup="action"),
        "schedule_type",
        PausedFilter,
        task_column_filter("queue", lookup="queue"),
    )
    # A fragment of an id or a word of a name, found through their trigram indexes.
    search_fields = ("id", "name")
    show_full_result_count = False
    paginator = BoundedPaginator  # no COUNT(*) over every task (selectors/paging.py)
    readonly_fields = (
        "status_explained",
        "next_run",
        "paused",
        "pause_note",
        "paused_since",
        "paused_by",
        "alarm",
        "fire_count",
        "consecutive_failures",
        "created",
        "updated",
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
            "Flow control",
            {
                "classes": ("collapse",),
                "fields": FLOW_FIELDS,
            },
        ),
        (
            "State",
            {
                "fields": (
                    "status_explained",
                    "next_run",
                    "alarm",
                    "paused",
                    "pause_note",
                    "paused_since",
                    "paused_by",
                    "fire_count",
                    "consecutive_failures",
                    "created",
                    "updated",
                )
            },
        ),
        ("Last runs", {"fields": ("recent_runs",)}),
        ("Audit trail", {"classes": ("collapse",), "fields": ("audit_trail",)}),
    )
    actions = ("run_now", "pause", "resume")

    class Media:  # admin.css and admin.js come with every page (templates/admin/base_site.html)
        js = (
            "tasks_app/task_preview.js",
            "tasks_app/vendor/jsoneditor.js",
            "tasks_app/payload_form.js",
        )

    def get_form(
        self, request: HttpRequest, obj: Task | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        return type(form.__name__, (form,), {"user": request.user})

    def get_fieldsets(self, request: HttpRequest, obj: Task | None = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None:  # a task being added has no state, runs or history yet
            return [f for f in fieldsets if f[0] not in ("State", "Last runs", "Audit trail")]
        if obj.declared_in:
            first = fieldsets[0]
            return [
                (first[0], {**first[1], "fields": ("declared", *first[1]["fields"])}),
                *fieldsets[1:],
            ]
        return fieldsets

    def get_readonly_fields(self, request: HttpRequest, obj: Task | None = None) -> Any:
        fields = super().get_readonly_fields(request, obj)
        if obj is not None and services.definition_refusal(obj):  # it changes only in code
            return (*fields, "id", "declared", *services.TASK_FIELDS)
        return (*fields, "id") if obj else fields

    @admin.display(description="defined in")
    def owner(self, task: Task) -> str:
        return f"code: {task.declared_in}" if task.declared_in else "admin, API, CLI"

    @admin.display(description="declared in code")
    def declared(self, task: Task) -> str:
        refusal = services.definition_refusal(task) or ""
        return f"{refusal[:1].upper()}{refusal[1:]}."

    def get_queryset(self, request: HttpRequest) -> QuerySet[Task]:
        return super().get_queryset(request).select_related("periodic_task", "state")

    def get_object(self, request: HttpRequest, object_id: str, from_field: Any = None) -> Any:
        # Secret payload fields are shown (and sent back) as "set": the service keeps the
        # stored value for those (``secret_fields``).
        task = super().get_object(request, object_id, from_field)
        if task is not None:
            task.payload = secret_fields.payload_masked(task.action, task.payload)
        return task

    # --- who may do what: Django's hooks, answered by the one table -----------------------

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return permissions.allows(request.user, "get")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return permissions.allows(request.user, "create")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return permissions.allows(request.user, "update")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and services.definition_refusal(obj):  # removed from code, synced
            return False
        return permissions.allows(request.user, "delete")

    def has_run_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return permissions.allows(request.user, "execute")

    def has_pause_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return permissions.allows(request.user, "pause")

    def has_resume_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return permissions.allows(request.user, "resume")

    def has_duplicate_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return permissions.allows(request.user, "duplicate")

    # --- saving ----------------------------------------------------------------------------

    def save_model(self, request: HttpRequest, obj: Task, form: Any, change: bool) -> None:
        if not (change and services.definition_refusal(obj)):  # a declared one: nothing to save
            services.task_save(task=obj, by=request.user)
        delay = form.cleaned_data.get("delay_seconds")
        if delay is not None:
            run = services.task_schedule_once(task=obj, delay_seconds=delay, by=request.user)
            self.message_user(
                request,
                format_html(
                    "Run {} is {}, due {}.", str(run.id)[:8], run.status, instant(run.due_at)
                ),
            )

    def response_change(self, request: HttpRequest, obj: Task) -> HttpResponse:
        """A task declared in code has nothing to change here (its definition is read-only):
        its form says so instead of "changed successfully" (a delayed run it asked for is
        scheduled, and said, by :meth:`save_model`)."""
        refusal = services.definition_refusal(obj)
        if refusal is None:
            return super().response_change(request, obj)
        if not request.POST.get("delay_seconds"):
            self.message_user(request, f"Nothing was changed: {refusal}.", messages.ERROR)
        return self._back(obj)

    def delete_model(self, request: HttpRequest, obj: Task) -> None:
        services.task_delete(task=obj, by=request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        for task in queryset:
            refusal = services.definition_refusal(task)
            if refusal:
                self.message_user(request, f"Not deleted: {refusal}.", level=messages.ERROR)
                continue
            services.task_delete(task=task, by=request.user)

    def render_change_form(
        self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any
    ) -> HttpResponse:
        obj = kwargs.get("obj")
        context["next_run"] = admin_views.next_run_state(obj) if obj else ""
        context["action_schemas"] = action_schemas()
        context["payload_check_url"] = reverse("admin:tasks_app_task_payload_check") + (
            f"?{urlencode({'task': obj.pk})}" if obj else ""  # its secrets are checked as stored
        )
        context["zone_names"] = sorted(scheduling._zone_names())
        context["pause_note_max_length"] = validation.PAUSE_NOTE_MAX_LENGTH
        if obj is not None:  # "Run now with…" starts from the task's payload, secrets masked
            shown = secret_fields.payload_masked(obj.action, obj.payload)
            context["run_payload_example"] = json.dumps(shown)
        for button in ("run", "pause", "resume", "duplicate"):
            context[f"may_{button}"] = getattr(self, f"has_{button}_permission")(request, obj)
        return super().render_change_form(request, context, *args, **kwargs)

    # --- buttons on the task page ----------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        site = self.admin_site
        own = [
            path("preview/", wrap(admin_views.preview_view), name="tasks_app_task_preview"),
            path(
                "payload-check/",
                wrap(admin_views.payload_check_view),
                name="tasks_app_task_payload_check",
            ),
        ]
        buttons = {
            "run-now": self.run_now_view,
            "pause": self.pause_view,
            "resume": self.resume_view,
            "duplicate": self.duplicate_view,
        }
        return own + button_paths(site, "task", buttons) + super().get_urls()

    def _task_for_button(self, request: HttpRequest, object_id: str) -> Task:
        """The task, for a user who may see it (403 otherwise; the service decides the rest)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        return get_object_or_404(Task, pk=object_id)

    def _refused(self, request: HttpRequest, task: Task, exc: PermissionDenied) -> None:
        self.message_user(request, f"Task {task.pk} refused: {exc}.", messages.ERROR)

    def _back(self, task: Task) -> HttpResponseRedirect:
        return HttpResponseRedirect(reverse("admin:tasks_app_task_change", args=[task.pk]))

    def run_now_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        task = self._task_for_button(request, object_id)
        try:
            payload = _posted_payload(request)
            run = services.task_execute(
                task=task,
                trigger=Trigger.ADMIN,
                by=request.user,
                payload=payload,
                **_posted_unique(request),
            )
        except PermissionDenied as exc:
            self._refused(request, task, exc)
            return self._back(task)
        except ValidationError as exc:
            self.message_user(
                request, f"Task {task.pk} not run: {validation.one_line(exc)}", messages.ERROR
            )
            return self._back(task)
        # Published on commit: read the status the run has now, not the one it was created in.
        run.refresh_from_db(fields=["status", "due_at"])
        link = reverse("admin:tasks_app_run_change", args=[run.pk])
        self.message_user(request, format_html("{} {}", _run_link(run, link), _run_now_state(run)))
        return self._back(task)

    def pause_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        task = self._task_for_button(request, object_id)
        try:
            services.task_pause(task=task, note=request.POST.get("note", ""), by=request.user)
        except PermissionDenied as exc:
            self._refused(request, task, exc)
            return self._back(task)
        except ValidationError as exc:
            self.message_user(
                request, f"Task {task.pk} not paused: {validation.one_line(exc)}", messages.ERROR
            )
            return self._back(task)
        note = task.state.pause_note
        said = f": {note}" if note else "."
        self.message_user(request, f"Task {task.pk} paused{said}", messages.SUCCESS)
        return self._back(task)

    def resume_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        task = self._task_for_button(request, object_id)
        try:
            services.task_resume(task=task, by=request.user)
        except PermissionDenied as exc:
            self._refused(request, task, exc)
            return self._back(task)
        self.message_user(request, f"Task {task.pk} resumed.", messages.SUCCESS)
        return self._back(task)

    def duplicate_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        task = self._task_for_button(request, object_id)
        try:
            copy = services.task_duplicate(task=task, by=request.user)
        except PermissionDenied as exc:
            self._refused(request, task, exc)
            return self._back(task)
        except (ValidationError, services.ConflictError) as exc:
            text = "; ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)
            self.message_user(request, f"Could not duplicate {task.pk}: {text}", messages.ERROR)
            return self._back(task)
        note = " It is paused: review it, then resume." if copy.paused else ""
        self.message_user(
            request, f"Task {copy.pk} created as a copy of {task.pk}.{note}", messages.SUCCESS
        )
        return self._back(copy)

    # --- list actions ----------------------------------------------------------------------

    def _each(
        self, request: HttpRequest, queryset: QuerySet[Task], service: Callable[[Task], Any]
    ) -> list[Any]:
        """``service`` on each selected task; a task the service refuses is reported."""
        done = []
        for task in queryset:
            try:
                done.append(service(task))
            except PermissionDenied as exc:
                self._refused(request, task, exc)
        return done

    @admin.action(description="Run now", permissions=["run"])
    def run_now(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        runs = self._each(
            request,
            queryset,
            lambda task: services.task_execute(task=task, trigger=Trigger.ADMIN, by=request.user),
        )
        if not runs:
            return
        statuses = Run.objects.filter(pk__in=[r.pk for r in runs]).values_list("status", flat=True)
        by_status: dict[str, int] = {}
        for status in statuses:
            by_status[status] = by_status.get(status, 0) + 1
        states = ", ".join(f"{n} {status}" for status, n in sorted(by_status.items()))
        self.message_user(
            request, f"{len(runs)} run(s) created, now {states}. A worker starts each queued run."
        )

    @admin.action(description="Pause", permissions=["pause"])
    def pause(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        paused = self._each(
            request,
            queryset,
            lambda task: services.task_pause(
                task=task, note="paused from the admin", by=request.user
            ),
        )
        self.message_user(request, f"{len(paused)} task(s) paused.", messages.SUCCESS)

    @admin.action(description="Resume", permissions=["resume"])
    def resume(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        resumed = self._each(
            request, queryset, lambda task: services.task_resume(task=task, by=request.user)
        )
        self.message_user(request, f"{len(resumed)} task(s) resumed.", messages.SUCCESS)
