"""Django admin: the operator's cockpit.

- **Task page**: the schedule edited in place (kind, interval or cron with its time zone,
  policies), the schedule in words and its next five fires (server-side on load, live from
  ``preview/`` as you type), status and next run, the last runs with status badges, and the
  buttons *Run now*, *Pause* (with a note), *Resume*, *Duplicate*.
- **Run list**: filters, search by task id or run id (full or the 8-character short id),
  columns for due, started, lateness, duration, attempt; the run page shows output, error,
  the Celery result and the neighbouring attempts, with *Retry* and *Cancel*.
- **Overview** (``/admin/overview/``, linked from the index and as "View site"): see
  ``admin_views``, which also holds the presentation rules (instants to the second in UTC,
  durations, badges, what "Next run" is).
- **Site**: the product's header with a link to the API docs, the product's section first
  on the index.

Saves, buttons and actions go through ``tasks_app.services``; the admin holds no rules of its
own, and service validation errors are shown next to their field (``Task.clean``). Which
actions a user may use is ``tasks_app.permissions``: the action list offers only those, a
forbidden one is an error on the action field, and buttons on a task whose action the user
may not use are refused with a message.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Q, QuerySet
from django.forms.fields import InvalidJSONInput
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse, reverse_lazy
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString
from django.views.decorators.http import require_POST
from django_celery_results.models import TaskResult

from .. import actions, permissions, secret_fields, services, validation
from ..models import (
    CANCELLABLE_RUN_STATUSES,
    RETRYABLE_RUN_STATUSES,
    Run,
    Task,
    TaskAuditEntry,
    Trigger,
)
from ..services.tasks import EXECUTION_FIELDS, POLICY_FIELDS
from ..timing import scheduling
from . import views as admin_views
from .paging import HistoryPaginator
from .views import badge, duration, instant

RECENT_RUNS = 10
AUDIT_ENTRIES = 20
PRODUCT = "Scheduled tasks"
# The product's own models first on the index and in the sidebar, in this order.
MODEL_ORDER = {"Task": 0, "Run": 1, "TaskAuditEntry": 2}

admin.site.site_header = PRODUCT
admin.site.site_title = PRODUCT
# "View site" opens the overview; lazy, as the URLconf is not loaded when admin.py is.
admin.site.site_url = reverse_lazy("tasks-overview")  # type: ignore[assignment]
_stock_app_list = admin.site.get_app_list


def _app_list_product_first(request: HttpRequest, app_label: str | None = None) -> list[Any]:
    """Django sorts apps by name, which puts ours after tokens, results and beat."""
    apps = _stock_app_list(request, app_label)
    for app in apps:
        if app["app_label"] == "tasks_app":
            app["models"].sort(key=lambda m: MODEL_ORDER.get(m["object_name"], 9))
    return sorted(apps, key=lambda app: app["app_label"] != "tasks_app")


# The default site is built by django.contrib.admin's AppConfig; replacing it would need
# a settings change, so only this one method is overridden on the instance.
admin.site.get_app_list = _app_list_product_first  # type: ignore[method-assign]


def _action_choices(user: Any = None) -> list[tuple[str, str]]:
    """Each registered action (that ``user``, if given, may use) with its one-line
    description, as the select shows it."""
    offered = actions.all_actions() if user is None else permissions.usable_actions(user)
    return [(a.name, f"{a.name} — {a.description}") for a in offered]


def action_schemas() -> dict[str, dict[str, Any]]:
    """What the payload form is built from: each action's description and payload schema."""
    return {
        a.name: {"description": a.description, "schema": a.schema} for a in actions.all_actions()
    }


class ActionField(forms.ChoiceField):
    """A select of the registered actions. Whether a name is registered is decided by
    ``validation.validate_task`` (one rule, one message naming the known actions)."""

    def valid_value(self, value: str) -> bool:
        return True


class PayloadField(forms.JSONField):
    """The payload as JSON text. What cannot be stored (``validation.json_problem``: lone
    surrogates, NUL, nesting past ``MAX_JSON_DEPTH``) is a form error on the field, and a
    refused payload is shown again as it was typed (re-encoding it would fail)."""

    def to_python(self, value: Any) -> Any:
        try:
            data = super().to_python(value)
        except RecursionError:
            raise ValidationError(f"nests deeper than {validation.MAX_JSON_DEPTH} levels") from None
        found = validation.json_problem(data, "payload")
        if found is not None:
            where, what = found
            raise ValidationError(what if where == "payload" else f"at {where}: {what}")
        return data

    def bound_data(self, data: Any, initial: Any) -> Any:
        if self.disabled:
            return initial
        return None if data is None else InvalidJSONInput(data)


class TaskForm(forms.ModelForm):
    action = ActionField(
        choices=_action_choices,
        help_text="What a run does. The payload form below follows the action's schema.",
    )
    delay_seconds = forms.FloatField(
        required=False,
        label="Run once after (seconds)",
        help_text="Optional: on save, also schedule one run this many seconds from now.",
    )

    class Meta:
        model = Task
        fields = ("id", *services.TASK_FIELDS)
        field_classes = {"payload": PayloadField}
        widgets = {
            "timezone": forms.TextInput(attrs={"list": "tasks-zones", "autocomplete": "off"}),
            "cron": forms.TextInput(
                attrs={"size": 30, "class": "tasks-mono", "placeholder": "*/5 * * * *"}
            ),
            "payload": forms.Textarea(attrs={"rows": 6, "cols": 60, "class": "tasks-mono"}),
        }

    # The user the form is for (set by ``TaskAdmin.get_form``): the actions they may use.
    user: Any = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["action"]
        assert isinstance(field, ActionField)
        current = self.instance.action if self.instance else ""
        offered = _action_choices(self.user)
        if current and current not in {a.name for a in actions.all_actions()}:
            # Keep an action that is no longer registered visible; saving it is refused.
            field.choices = [(current, f"{current} — not registered"), *offered]
        elif current and current not in {name for name, _ in offered}:
            # Shown as it is; saving is refused unless the user picks one they may use.
            needs = permissions.required_permission(current)
            field.choices = [(current, f"{current} — needs the permission {needs}"), *offered]
        elif not current:
            field.choices = [("", "— choose an action —"), *offered]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.user is not None and "action" in cleaned:
            stored = None if self.instance._state.adding else self.initial.get("action")
            try:
                permissions.check_actions(self.user, *filter(None, (stored, cleaned["action"])))
            except permissions.ActionNotPermitted as exc:
                self.add_error("action", exc.sentence)
        return cleaned

    def clean_payload(self) -> Any:
        # The form shows each stored secret as "set" (``TaskAdmin.get_object``): sent back
        # as "set", it stands for the stored value, which the model's checks must see.
        payload = self.cleaned_data.get("payload")
        stored = None if self.instance._state.adding else Task.objects.filter(pk=self.instance.pk)
        row = stored.values("action", "payload").first() if stored is not None else None
        if row is None:
            return payload
        return secret_fields.payload_merged(
            self.cleaned_data.get("action") or self.instance.action,
            payload,
            stored_action=row["action"],
            stored=row["payload"],
        )

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


def _run_link(run: Run, url: str) -> SafeString:
    return format_html("Run <a href='{}'>{}</a>", url, str(run.pk)[:8])


def _run_now_state(run: Run) -> SafeString:
    """What Run now did, as it is: a run is queued (published) or still pending, not started."""
    if run.status == "queued":
        return format_html("is queued (due {}): a worker starts it next.", instant(run.due_at))
    if run.status == "pending":
        return format_html("is pending: it is published when due ({}).", instant(run.due_at))
    return format_html("is {}.", run.status)


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    form = TaskForm
    change_form_template = "admin/tasks_app/task/change_form.html"
    list_display = ("id", "name", "action", "schedule", "status_badge", "next_run_cell")
    list_filter = ("state__status", "action", "schedule_type", "paused", "queue")
    search_fields = ("id", "name")
    readonly_fields = (
        "status_badge",
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
            "State",
            {
                "fields": (
                    "status_badge",
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
        return fieldsets

    def get_readonly_fields(self, request: HttpRequest, obj: Task | None = None) -> Any:
        fields = super().get_readonly_fields(request, obj)
        return (*fields, "id") if obj else fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Task]:
        return super().get_queryset(request).select_related("periodic_task", "state")

    def get_object(self, request: HttpRequest, object_id: str, from_field: Any = None) -> Any:
        # Secret payload fields are shown (and sent back) as "set": the service keeps the
        # stored value for those (``secret_fields``).
        task = super().get_object(request, object_id, from_field)
        if task is not None:
            task.payload = secret_fields.payload_masked(task.action, task.payload)
        return task

    # --- columns and read-only fields ------------------------------------------------------

    @admin.display(description="schedule")
    def schedule(self, task: Task) -> str:
        if task.schedule_type == "interval":
            return f"every {task.interval_seconds} s"
        if task.schedule_type == "cron":
            return f"cron {task.cron} ({task.timezone})"
        if task.schedule_type == "once":
            return format_html("once at {}", instant(task.run_at)) if task.run_at else "once"
        return "on demand"

    @admin.display(description="status", ordering="state__status")
    def status_badge(self, task: Task) -> SafeString:
        return badge(task.state.status)

    @admin.display(description="next run", ordering="state__next_run_at")
    def next_run(self, task: Task) -> SafeString | str:
        return admin_views.next_run_state(task)

    @admin.display(description="fire count")
    def fire_count(self, task: Task) -> int:
        return task.state.fire_count

    @admin.display(description="consecutive failures")
    def consecutive_failures(self, task: Task) -> int:
        return task.state.consecutive_failures

    @admin.display(description="next run", ordering="state__next_run_at")
    def next_run_cell(self, task: Task) -> SafeString | str:
        return admin_views.next_run_state(task, compact=True)

    @admin.display(description="paused since")
    def paused_since(self, task: Task) -> SafeString | str:
        return instant(task.paused_at)

    @admin.display(description="created")
    def created(self, task: Task) -> SafeString | str:
        return instant(task.created_at)

    @admin.display(description="updated")
    def updated(self, task: Task) -> SafeString | str:
        return instant(task.updated_at)

    @admin.display(description="missed-run alarm")
    def alarm(self, task: Task) -> SafeString | str:
        if task.alarm_since is None:
            return "-"
        return format_html(
            '<strong class="tasks-alarm">since {}</strong> {}',
            instant(task.alarm_since),
            task.alarm_note,
        )

    @admin.display(description="in words and next fires")
    def schedule_preview(self, task: Task) -> SafeString:
        try:
            data = admin_views.preview_of(task)
        except ValidationError as exc:  # a schedule that cannot be computed, field named
            data = {"description": f"cannot preview: {'; '.join(exc.messages)}", "fires": []}
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
            rows
            or format_html(
                "<li class='tasks-muted'>{}</li>",
                "no fires: runs only when asked"
                if task.schedule_type == "none"
                else "no upcoming fire",
            ),
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
                    instant(e.at),
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
            "<table class='tasks-runs'><thead><tr><th>when</th><th>who</th><th>what</th>"
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
                    instant(r.due_at),
                    duration(r.lateness_ms),
                    duration(r.duration_ms),
                )
                for r in runs
            ),
        )
        more = reverse("admin:tasks_app_run_changelist") + f"?task__id__exact={task.pk}"
        return format_html(
            "<table class='tasks-runs'><thead><tr><th>run</th><th>status</th><th>trigger</th>"
            "<th>attempt</th><th>due</th><th>lateness</th><th>duration</th></tr></thead>"
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
            self.message_user(
                request,
                format_html(
                    "Run {} is {}, due {}.", str(run.id)[:8], run.status, instant(run.due_at)
                ),
            )

    def delete_model(self, request: HttpRequest, obj: Task) -> None:
        services.task_delete(task=obj, by=_user(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        for task in queryset:
            services.task_delete(task=task, by=_user(request))

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
        return super().render_change_form(request, context, *args, **kwargs)

    # --- buttons on the task page ----------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        own = [
            path("preview/", wrap(admin_views.preview_view), name="tasks_app_task_preview"),
            path(
                "payload-check/",
                wrap(admin_views.payload_check_view),
                name="tasks_app_task_payload_check",
            ),
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

    def _refused(self, request: HttpRequest, task: Task) -> bool:
        """Whether the user may not use ``task``'s action (and was told so)."""
        try:
            permissions.check_actions(request.user, task.action)
        except permissions.ActionNotPermitted as exc:
            self.message_user(request, f"Task {task.pk} refused: {exc}.", messages.ERROR)
            return True
        return False

    def _back(self, task: Task) -> HttpResponseRedirect:
        return HttpResponseRedirect(reverse("admin:tasks_app_task_change", args=[task.pk]))

    def run_now_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return require_POST(self._run_now)(request, object_id)

    def _run_now(self, request: HttpRequest, object_id: str) -> HttpResponse:
        task = self._task_for_button(request, object_id)
        if self._refused(request, task):
            return self._back(task)
        run = services.task_execute(task=task, trigger=Trigger.ADMIN)
        # Published on commit: read the status the run has now, not the one it was created in.
        run.refresh_from_db(fields=["status", "due_at"])
        link = reverse("admin:tasks_app_run_change", args=[run.pk])
        self.message_user(request, format_html("{} {}", _run_link(run, link), _run_now_state(run)))
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
        if self._refused(request, task):
            return self._back(task)
        services.task_resume(task=task, by=_user(request))
        self.message_user(request, f"Task {task.pk} resumed.", messages.SUCCESS)
        return self._back(task)

    def duplicate_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return require_POST(self._duplicate)(request, object_id)

    def _duplicate(self, request: HttpRequest, object_id: str) -> HttpResponse:
        task = self._task_for_button(request, object_id)
        if self._refused(request, task):
            return self._back(task)
        try:
            copy = services.task_duplicate(task=task, by=_user(request))
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

    @admin.action(description="Run now", permissions=["change"])
    def run_now(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        allowed = [task for task in queryset if not self._refused(request, task)]
        runs = [services.task_execute(task=task, trigger=Trigger.ADMIN) for task in allowed]
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

    @admin.action(description="Pause", permissions=["change"])
    def pause(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        for task in queryset:
            services.task_pause(task=task, note="paused from the admin", by=_user(request))
        self.message_user(request, f"{queryset.count()} task(s) paused.", messages.SUCCESS)

    @admin.action(description="Resume", permissions=["change"])
    def resume(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        allowed = [task for task in queryset if not self._refused(request, task)]
        for task in allowed:
            services.task_resume(task=task, by=_user(request))
        self.message_user(request, f"{len(allowed)} task(s) resumed.", messages.SUCCESS)


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
        "trigger_attempt",
        "due",
        "started",
        "lateness",
        "duration",
        "worker_name",
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
    paginator = HistoryPaginator  # no COUNT(*) over the whole history (admin_paging)
    actions = ("cancel", "retry")
    fields = (
        "id",
        "task_link",
        "status_badge",
        "trigger",
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
            instant(result.date_done),
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
        return require_POST(self._button(services.run_retry, "retried", runs_action=True))(
            request, object_id
        )

    def _button(
        self, service: Callable[..., Run], verb: str, *, runs_action: bool = False
    ) -> Callable[..., HttpResponse]:
        """A POST-only button; ``runs_action``: it makes the task's action run again, so the
        user must be allowed to use that action (``tasks_app.permissions``)."""

        def view(request: HttpRequest, object_id: str) -> HttpResponse:
            run = get_object_or_404(Run.objects.select_related("task"), pk=object_id)
            if not self.has_change_permission(request, run):
                raise PermissionDenied
            target = run
            try:
                if runs_action:
                    permissions.check_actions(request.user, run.task.action)
                result = service(run=run)
                target = result
                self.message_user(request, f"Run {str(run.pk)[:8]} {verb}.", messages.SUCCESS)
            except services.ConflictError as exc:
                self.message_user(request, str(exc), messages.WARNING)
            except permissions.ActionNotPermitted as exc:
                self.message_user(request, f"Run {str(run.pk)[:8]} refused: {exc}.", messages.ERROR)
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
            found = Run.objects.filter(pk=object_id).values_list("status", "task_id").first()
            status, task_id = found or ("", "")
            # Runs are read-only here: the page is the run, not a form to change it.
            extra["title"] = f"Run {str(object_id)[:8]} of task {task_id}" if found else "Run"
            extra["can_cancel"] = status in CANCELLABLE_RUN_STATUSES
            extra["can_retry"] = status in RETRYABLE_RUN_STATUSES
        return super().changeform_view(request, object_id, form_url, extra)

    @admin.action(description="Cancel (pending or queued runs)", permissions=["change"])
    def cancel(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        self._each(request, queryset, services.run_cancel, "cancelled", CANCELLABLE_RUN_STATUSES)

    @admin.action(description="Retry (failed, expired or cancelled runs)", permissions=["change"])
    def retry(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        self._each(
            request,
            queryset,
            services.run_retry,
            "retried",
            RETRYABLE_RUN_STATUSES,
            runs_action=True,
        )

    def _each(
        self,
        request: HttpRequest,
        queryset: QuerySet[Run],
        service: Callable[..., Run],
        verb: str,
        offered: frozenset[str],
        *,
        runs_action: bool = False,
    ) -> None:
        """Apply ``service`` to the selected runs in ``offered`` statuses; the others are
        counted and left alone, and the service's own refusal (a race) is reported."""
        done, left = 0, 0
        for run in queryset.select_related("task"):
            if run.status not in offered:
                left += 1
                continue
            try:
                if runs_action:
                    permissions.check_actions(request.user, run.task.action)
                service(run=run)
                done += 1
            except services.ConflictError as exc:
                self.message_user(request, str(exc), messages.WARNING)
            except permissions.ActionNotPermitted as exc:
                self.message_user(request, f"Run {str(run.pk)[:8]} refused: {exc}.", messages.ERROR)
        self.message_user(request, f"{done} run(s) {verb}.", messages.SUCCESS)
        if left:
            self.message_user(
                request,
                f"{left} run(s) left alone: only {', '.join(sorted(offered))} runs can be {verb}.",
                messages.WARNING,
            )


from . import tokens as _tokens  # noqa: E402,F401  (the API tokens page)
