"""How a task and a run are written out as JSON: the REST API's responses and
``manage.py tasks --json`` (one shape for both; DRF serializers, so the OpenAPI document
describes them)."""

from __future__ import annotations

from typing import Any

from django.db import models
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from . import secret_fields
from .models import RunStatus, Task, TaskStatus, Trigger
from .services import TASK_FIELDS


@extend_schema_field(
    {"type": "object", "additionalProperties": True, "description": "A JSON object."}
)
class JSONObjectField(serializers.JSONField):
    """A JSON object (``{...}``): not an array, a string, a number or ``null``."""

    default_error_messages = {"not_object": "must be a JSON object"}

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        if not isinstance(value, dict):
            self.fail("not_object")
        return value


class TaskOutputSerializer(serializers.ModelSerializer):
    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.JSONField: JSONObjectField,
    }
    # The task's state row (``TaskState``), shown as the task's own fields.
    status = serializers.ChoiceField(
        source="state.status", choices=TaskStatus.choices, read_only=True
    )
    next_run_at = serializers.DateTimeField(
        source="state.next_run_at", allow_null=True, read_only=True
    )
    fire_count = serializers.IntegerField(source="state.fire_count", read_only=True)
    consecutive_failures = serializers.IntegerField(
        source="state.consecutive_failures", read_only=True
    )

    class Meta:
        model = Task
        fields: tuple[str, ...] = (
            "id",
            *TASK_FIELDS,
            "status",
            "next_run_at",
            "paused",
            "pause_note",
            "paused_at",
            "paused_by",
            "fire_count",
            "consecutive_failures",
            "alarm_since",
            "alarm_note",
            "created_at",
            "updated_at",
        )
        read_only_fields: tuple[str, ...] = fields

    def to_representation(self, instance: Task) -> dict[str, Any]:
        data = super().to_representation(instance)
        if "payload" in data:  # secret fields are write-only (``secret_fields``)
            data["payload"] = secret_fields.payload_masked(instance.action, data["payload"])
        return data


class RunOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    task = serializers.CharField(source="task_id")
    action = serializers.CharField(source="task.action")
    trigger = serializers.ChoiceField(choices=Trigger.choices)
    status = serializers.ChoiceField(choices=RunStatus.choices)
    attempt = serializers.IntegerField()
    first_attempt = serializers.UUIDField(source="first_attempt_id", allow_null=True)
    interruptions = serializers.IntegerField(
        help_text="Earlier attempts of this run cut off by their worker's death (status "
        "'interrupted'); not counted against max_retries, at most TASKS_MAX_INTERRUPTIONS."
    )
    scheduled_for = serializers.DateTimeField()
    due_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    queued_at = serializers.DateTimeField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    lateness_ms = serializers.FloatField(allow_null=True, help_text="started_at - due_at, in ms")
    duration_ms = serializers.IntegerField(allow_null=True)
    worker = serializers.CharField()
    output = serializers.CharField(help_text="At most 64 KiB; see 'truncated'.")
    truncated = serializers.BooleanField()
    error = serializers.CharField(help_text="Message and traceback of a failed attempt.")
    result = serializers.JSONField(allow_null=True)


class TaskCreatedSerializer(TaskOutputSerializer):
    """The new task, and its one run when ``delay_seconds``/``run_at`` scheduled one."""

    run = serializers.SerializerMethodField()

    class Meta(TaskOutputSerializer.Meta):
        fields = (*TaskOutputSerializer.Meta.fields, "run")
        read_only_fields = fields

    @extend_schema_field(RunOutputSerializer(allow_null=True))
    def get_run(self, task: Task) -> dict[str, Any] | None:
        run = self.context.get("run")
        return None if run is None else dict(RunOutputSerializer(run).data)
