"""How a task, a run and a queue are written out as JSON: the REST API's responses and
``manage.py tasks --json`` (one shape for both; DRF serializers, so the OpenAPI document
describes them)."""

from __future__ import annotations

from typing import Any

from django.db import models
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..models import Run, RunStatus, Task, TaskStatus, Trigger
from ..services import TASK_FIELDS
from ..vocabulary import secret_fields
from . import OUTCOME_STATUSES, task_next_run_at


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


class NextRunField(serializers.DateTimeField):
    """A task's next run, as :func:`tasks_app.selectors.task_next_run_at` defines it."""

    def get_attribute(self, instance: Task) -> Any:
        return task_next_run_at(instance)


class TaskOutputSerializer(serializers.ModelSerializer):
    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.JSONField: JSONObjectField,
    }
    # The task's state row (``TaskState``), shown as the task's own fields.
    status = serializers.ChoiceField(
        source="state.status", choices=TaskStatus.choices, read_only=True
    )
    next_run_at = NextRunField(
        allow_null=True,
        read_only=True,
        help_text="The next run due; null while the task is paused (and when none is planned).",
    )
    fire_count = serializers.IntegerField(source="state.fire_count", read_only=True)
    consecutive_failures = serializers.IntegerField(
        source="state.consecutive_failures", read_only=True
    )
    alarm_since = serializers.DateTimeField(
        source="state.alarm_since", read_only=True, allow_null=True
    )
    alarm_note = serializers.CharField(source="state.alarm_note", read_only=True)
    paused = serializers.BooleanField(read_only=True)
    pause_note = serializers.CharField(source="state.pause_note", read_only=True)
    paused_at = serializers.DateTimeField(source="state.paused_at", read_only=True, allow_null=True)
    paused_by = serializers.CharField(source="state.paused_by", read_only=True)

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
            "declared_in",
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
    action = serializers.CharField(
        source="made_with",
        help_text="The action this run was made with (its payload's secret fields are masked "
        "by it for good, whatever its task becomes).",
    )
    trigger = serializers.ChoiceField(choices=Trigger.choices)
    requested_by = serializers.CharField(
        help_text="Who asked for this run: a user's name (cli:<login> from the command line "
        "without --as), or beat (a schedule's fire), schedule:<module> (a schedule declared "
        "in code), code (an enqueue from code), retry:<run id> (the next attempt of that "
        "run); blank for runs made before it was recorded."
    )
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
    cancel_requested_at = serializers.DateTimeField(
        allow_null=True,
        help_text="When a person asked this run to stop while it ran; it ends 'cancelled'.",
    )
    held = serializers.CharField(
        help_text="Why this pending run waits past its due instant under its task's flow "
        "control: concurrency (for a free slot), rate (for the start it reserved, not_before); "
        "blank when it does not."
    )
    not_before = serializers.DateTimeField(
        allow_null=True, help_text="The start a rate limit reserved for this run."
    )
    flow_key = serializers.CharField(
        help_text="This run's key under its task's flow control (its flow_key's value in the "
        "payload), recorded when it is held or starts."
    )
    lateness_ms = serializers.FloatField(allow_null=True, help_text="started_at - due_at, in ms")
    duration_ms = serializers.IntegerField(allow_null=True)
    worker = serializers.CharField()
    payload = serializers.SerializerMethodField(
        help_text="This run's own payload (a call enqueued from code, a run now with other "
        "arguments), secret fields masked; null: it runs with its task's."
    )
    queue = serializers.CharField(source="queue_name", help_text="Its own, or its task's.")
    priority = serializers.IntegerField(
        source="priority_level", help_text="0 (last) to 9 (first): its own, or its task's."
    )
    unique_key = serializers.CharField(
        help_text="The uniqueness key of the call that made this run (docs/flow-control.md); "
        "blank: none."
    )
    deduplicated = serializers.BooleanField(
        read_only=True,
        help_text="True when a call answered with this run instead of a new one: a run "
        "with its unique_key was still waiting.",
    )
    output = serializers.CharField(help_text="At most 64 KiB; see 'truncated'.")
    truncated = serializers.BooleanField()
    error = serializers.CharField(help_text="Message and traceback of a failed attempt.")
    result = serializers.JSONField(allow_null=True)

    @extend_schema_field({"type": "object", "nullable": True, "additionalProperties": True})
    def get_payload(self, run: Run) -> Any:
        if run.payload is None:
            return None
        return secret_fields.payload_masked(run.made_with, run.payload)


class RunAttemptSerializer(serializers.Serializer):
    """One attempt of a run, as listed under ``attempts``."""

    id = serializers.UUIDField()
    attempt = serializers.IntegerField()
    trigger = serializers.ChoiceField(choices=Trigger.choices)
    status = serializers.ChoiceField(choices=RunStatus.choices)
    due_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    duration_ms = serializers.IntegerField(allow_null=True)
    worker = serializers.CharField()
    error = serializers.CharField(help_text="Message and traceback of a failed attempt.")


class RunDetailSerializer(RunOutputSerializer):
    """A run, with the outcome of all its attempts (retries and interruptions)."""

    # GET /api/runs/{id} and ``manage.py tasks show|wait --json``; serialized with
    # ``context={"outcome": selectors.run_outcome(run=run)}``.

    outcome = serializers.SerializerMethodField(
        help_text="The run's final status over all its attempts (retries and "
        "interruptions): completed, failed, expired, cancelled or skipped once its latest "
        "attempt has ended with none to follow; null while an attempt is still to come. "
        "Every attempt's id answers the same."
    )
    outcome_attempt = serializers.SerializerMethodField(
        help_text="The id of the latest attempt, the one whose status is the outcome (its "
        "output and result are on GET /api/runs/{that id})."
    )
    attempts = serializers.SerializerMethodField(
        help_text="Every attempt of the run, first to latest."
    )

    @extend_schema_field(
        serializers.ChoiceField(
            choices=[s for s in RunStatus.values if s in OUTCOME_STATUSES], allow_null=True
        )
    )
    def get_outcome(self, run: Run) -> str | None:
        return self.context["outcome"].status  # type: ignore[no-any-return]

    @extend_schema_field(serializers.UUIDField())
    def get_outcome_attempt(self, run: Run) -> str:
        return str(self.context["outcome"].latest.id)

    @extend_schema_field(RunAttemptSerializer(many=True))
    def get_attempts(self, run: Run) -> list[dict[str, Any]]:
        return list(RunAttemptSerializer(self.context["outcome"].attempts, many=True).data)


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


class QueueSerializer(serializers.Serializer):
    """A queue (``selectors.QueueState``)."""

    name = serializers.CharField()
    paused = serializers.BooleanField()
    paused_at = serializers.DateTimeField(allow_null=True, help_text="When it was paused.")
    paused_by = serializers.CharField(
        allow_blank=True, help_text="Who paused it ('' when not paused)."
    )
    note = serializers.CharField(
        allow_blank=True, help_text="Why it is paused ('' when not paused)."
    )
    waiting_runs = serializers.IntegerField(
        source="waiting", help_text="Runs waiting on it (pending or queued)."
    )
