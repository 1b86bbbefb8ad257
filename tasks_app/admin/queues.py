"""The paused queues page: each paused queue with when, by whom, why and the runs waiting on
it; *Add* pauses a queue (with a note), *Resume* (the list action, or deleting the pause)
resumes it and releases its waiting runs. Every write goes through
``services.queue_pause`` / ``services.queue_resume``; who may do what is the pause row's own
model permissions, answered by ``tasks_app.services.permissions``."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest

from .. import selectors, services
from ..models import QueuePause
from ..services import permissions
from ..vocabulary import validation
from .views import instant


class QueuePauseForm(forms.ModelForm):
    """Which queue to pause (one of ``TASKS_QUEUES``) and why."""

    queue = forms.CharField(
        max_length=100,
        help_text="One of TASKS_QUEUES. None of its runs starts until it is resumed; none is lost.",
    )

    class Meta:
        model = QueuePause
        fields = ("queue", "note")

    def clean_queue(self) -> str:
        name = str(self.cleaned_data.get("queue", "")).strip()
        validation.check_queue(name)  # its message is the form's error for the field
        return name

    def clean_note(self) -> str:
        try:
            return validation.check_pause_note(self.cleaned_data.get("note", ""))
        except ValidationError as exc:
            raise ValidationError(exc.messages) from None

    def validate_unique(self) -> None:
        """Pausing a paused queue is not an error: the service keeps the first pause."""


@admin.register(QueuePause)
class QueuePauseAdmin(admin.ModelAdmin):
    form = QueuePauseForm
    list_display = ("queue", "paused_since", "paused_by", "note", "waiting_runs")
    actions = ("resume",)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ("queue", "note") if obj is None else ("queue", "paused_at", "paused_by", "note")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return () if obj is None else ("queue", "paused_at", "paused_by", "note")

    def get_actions(self, request: HttpRequest) -> Any:
        found = super().get_actions(request)
        found.pop("delete_selected", None)  # resuming is the action below, through the service
        return found

    @admin.display(description="paused since")
    def paused_since(self, pause: QueuePause) -> Any:
        return instant(pause.paused_at)

    @admin.display(description="waiting runs")
    def waiting_runs(self, pause: QueuePause) -> int:
        # One count per paused queue: there are a few at most.
        return selectors.waiting_runs([pause.queue]).get(pause.queue, 0)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return permissions.allows(request.user, "queues")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return permissions.allows(request.user, "pause-queue")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return permissions.allows(request.user, "resume-queue")

    def save_model(self, request: HttpRequest, obj: QueuePause, form: Any, change: bool) -> None:
        pause = services.queue_pause(queue=obj.queue, note=obj.note, by=request.user)
        obj.paused_at, obj.paused_by, obj.note = pause.paused_at, pause.paused_by, pause.note
        obj._state.adding = False  # the service wrote the row; the admin only reports it

    def delete_model(self, request: HttpRequest, obj: QueuePause) -> None:
        services.queue_resume(queue=obj.queue, by=request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[QueuePause]) -> None:
        for pause in list(queryset):
            services.queue_resume(queue=pause.queue, by=request.user)

    @admin.action(description="Resume (release their waiting runs)", permissions=["delete"])
    def resume(self, request: HttpRequest, queryset: QuerySet[QueuePause]) -> None:
        names = [p.queue for p in queryset]
        for name in names:
            services.queue_resume(queue=name, by=request.user)
        self.message_user(
            request, f"{len(names)} queue(s) resumed: {', '.join(names)}.", messages.SUCCESS
        )
