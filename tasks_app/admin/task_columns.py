"""How a task is shown on its list and its page: the columns and the read-only fields
(schedule in words and next fires, status, alarm, last runs, audit trail)."""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from ..models import Task, TaskAuditEntry
from ..vocabulary.choices import TASK_STATUS_MEANING
from . import views as admin_views
from .views import badge, duration, instant

RECENT_RUNS = 10
AUDIT_ENTRIES = 20


class TaskColumns:
    """The display methods of ``TaskAdmin`` (``list_display``, ``readonly_fields``)."""

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
        status = task.state.status
        return badge(status, title=TASK_STATUS_MEANING.get(status, ""))

    @admin.display(description="status")
    def status_explained(self, task: Task) -> SafeString:
        status = task.state.status
        return format_html(
            '{} <span class="tasks-muted" id="task-status-meaning">{}</span>',
            badge(status),
            TASK_STATUS_MEANING.get(status, ""),
        )

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

    # The pause, read from the task's state row (where the services write it).
    @admin.display(description="paused", boolean=True)
    def paused(self, task: Task) -> bool:
        return task.paused

    @admin.display(description="pause note")
    def pause_note(self, task: Task) -> str:
        return task.state.pause_note

    @admin.display(description="paused since")
    def paused_since(self, task: Task) -> SafeString | str:
        return instant(task.state.paused_at)

    @admin.display(description="paused by")
    def paused_by(self, task: Task) -> str:
        return task.state.paused_by

    @admin.display(description="created")
    def created(self, task: Task) -> SafeString | str:
        return instant(task.created_at)

    @admin.display(description="updated")
    def updated(self, task: Task) -> SafeString | str:
        return instant(task.updated_at)

    @admin.display(description="missed-run alarm")
    def alarm(self, task: Task) -> SafeString | str:
        state = task.state
        if state.alarm_since is None:
            return "-"
        return format_html(
            '<strong class="tasks-alarm">since {}</strong> {}',
            instant(state.alarm_since),
            state.alarm_note,
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
