"""Django admin: tasks (schedule edited on the task's own page) and runs.

Saves and actions go through ``tasks_app.services``; the admin holds no rules of its own.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from . import services, validation
from .models import Run, Task, Trigger

RECENT_RUNS = 10


class TaskForm(forms.ModelForm):
    delay_seconds = forms.FloatField(
        required=False,
        label="Run once after (seconds)",
        help_text="Optional: on save, also schedule one run this many seconds from now.",
    )

    class Meta:
        model = Task
        fields = "__all__"

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


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    form = TaskForm
    list_display = ("id", "name", "action", "schedule", "status", "paused", "next_run_at")
    list_filter = ("status", "action", "schedule_type", "paused")
    search_fields = ("id", "name")
    readonly_fields = ("status", "next_run_at", "paused", "pause_note", "paused_at", "paused_by",
                       "created_at", "updated_at", "recent_runs")
    fieldsets = (
        (None, {"fields": ("id", "name", "description", "action", "payload")}),
        ("Schedule", {"fields": ("schedule_type", "run_at", "interval_seconds", "cron",
                                 "timezone", "delay_seconds")}),
        ("Execution", {"fields": ("queue", "priority", "max_retries", "retry_backoff_seconds",
                                  "timeout_seconds", "expires_after_seconds")}),
        ("State", {"fields": ("status", "next_run_at", "paused", "pause_note", "paused_at",
                              "paused_by", "created_at", "updated_at")}),
        ("Recent runs", {"fields": ("recent_runs",)}),
    )
    actions = ("run_now", "pause", "resume")

    def get_readonly_fields(self, request: HttpRequest, obj: Task | None = None) -> Any:
        fields = super().get_readonly_fields(request, obj)
        return (*fields, "id") if obj else fields

    @admin.display(description="schedule")
    def schedule(self, task: Task) -> str:
        if task.schedule_type == "interval":
            return f"every {task.interval_seconds} s"
        if task.schedule_type == "cron":
            return f"cron {task.cron} ({task.timezone})"
        if task.schedule_type == "once":
            return f"once at {task.run_at:%Y-%m-%d %H:%M:%S %Z}" if task.run_at else "once"
        return "on demand"

    @admin.display(description="last runs")
    def recent_runs(self, task: Task) -> SafeString | str:
        if task._state.adding:
            return "-"
        runs = task.runs.order_by("-due_at")[:RECENT_RUNS]
        rows = format_html_join(
            "",
            "<tr><td><a href='{}'>{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (reverse("admin:tasks_app_run_change", args=[r.pk]), str(r.pk)[:8], r.status,
                 r.trigger, r.due_at, r.lateness_ms if r.lateness_ms is not None else "")
                for r in runs
            ),
        )
        return format_html(
            "<table><tr><th>run</th><th>status</th><th>trigger</th><th>due</th>"
            "<th>lateness ms</th></tr>{}</table>",
            rows,
        ) if runs else "no runs yet"

    def save_model(self, request: HttpRequest, obj: Task, form: Any, change: bool) -> None:
        services.task_save(task=obj, by=_user(request))
        delay = form.cleaned_data.get("delay_seconds")
        if delay is not None:
            run = services.task_schedule_once(task=obj, delay_seconds=delay)
            self.message_user(request, f"Run {run.id} scheduled for {run.due_at:%H:%M:%S} UTC.")

    def delete_model(self, request: HttpRequest, obj: Task) -> None:
        services.task_delete(task=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        for task in queryset:
            services.task_delete(task=task)

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




@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("short_id", "task_link", "status", "trigger", "attempt", "due_at",
                    "started_at", "lateness_ms", "duration_ms")
    list_filter = ("status", "task__action", "trigger", ("due_at", admin.DateFieldListFilter))
    search_fields = ("=id", "task__id")
    list_select_related = ("task",)
    date_hierarchy = "due_at"
    actions = ("cancel", "retry")
    fields = ("id", "task_link", "status", "trigger", "attempt", "first_attempt",
              "scheduled_for", "due_at", "expires_at", "created_at", "queued_at", "started_at",
              "finished_at", "lateness_ms", "duration_ms", "worker", "output_block", "truncated",
              "error_block", "result")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="run")
    def short_id(self, run: Run) -> str:
        return str(run.id)[:8]

    @admin.display(description="task", ordering="task__id")
    def task_link(self, run: Run) -> SafeString:
        return format_html("<a href='{}'>{}</a>",
                           reverse("admin:tasks_app_task_change", args=[run.task_id]), run.task_id)

    @admin.display(description="output")
    def output_block(self, run: Run) -> SafeString:
        note = " (truncated to 64 KiB)" if run.truncated else ""
        return format_html("<pre style='white-space:pre-wrap'>{}</pre>{}", run.output, note)

    @admin.display(description="error")
    def error_block(self, run: Run) -> SafeString:
        return format_html("<pre style='white-space:pre-wrap'>{}</pre>", run.error)

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
