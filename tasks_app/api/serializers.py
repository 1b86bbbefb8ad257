"""Input shapes of the API; the output shapes are in ``tasks_app.selectors.representations``."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import MaxLengthValidator
from django.db import models
from django.utils import timezone
from rest_framework import serializers

from .. import actions
from ..models import RunStatus, ScheduleType, Task, TaskStatus, Trigger, task_id_validator
from ..selectors import MAX_PREVIEW
from ..selectors.representations import JSONObjectField, RunOutputSerializer
from ..services import TASK_FIELDS
from ..vocabulary import validation

RECURRING_SCHEDULE_CHOICES = [
    (ScheduleType.INTERVAL.value, ScheduleType.INTERVAL.label),
    (ScheduleType.CRON.value, ScheduleType.CRON.label),
]


class AwareDateTimeField(serializers.DateTimeField):
    """ISO 8601 with a time-zone offset; a naive time is refused, never guessed."""

    default_error_messages = {
        "naive": validation.NAIVE_INSTANT,
    }

    def enforce_timezone(self, value: Any) -> Any:
        if timezone.is_naive(value):
            self.fail("naive")
        return super().enforce_timezone(value)


def seconds_field(help_text: str, **kwargs: Any) -> serializers.FloatField:
    """A number of seconds in ``[0, TASKS_MAX_DELAY_SECONDS]`` (bounds shown in the schema too)."""
    low, high = validation.delay_bounds()
    return serializers.FloatField(
        min_value=low,
        max_value=high,
        help_text=help_text,
        error_messages={
            "min_value": validation.NEGATIVE_DELAY,
            "max_value": validation.max_delay_message(),
        },
        **kwargs,
    )


# The JSON type each kind of field takes. DRF coerces ("5" -> 5, 0 -> "0", "true" -> True);
# a JSON body is typed, and the OpenAPI document promises those types, so a value of
# another type is refused instead. Order matters: the first matching field class wins.
JSON_TYPES: list[tuple[type[serializers.Field], tuple[type, ...], str]] = [
    (serializers.BooleanField, (bool,), "must be true or false"),
    (serializers.IntegerField, (int,), "must be an integer"),
    (serializers.FloatField, (int, float), "must be a number"),
    (serializers.DateTimeField, (str,), "must be a string (an ISO 8601 date-time)"),
    (serializers.ChoiceField, (str,), "must be a string"),
    (serializers.CharField, (str,), "must be a string"),
]


def json_type_error(field: serializers.Field, value: Any) -> str | None:
    """Why ``value`` (parsed JSON) is of the wrong type for ``field``, or None."""
    if value is None:
        return None  # the field's own allow_null decides
    for field_class, types, message in JSON_TYPES:
        if isinstance(field, field_class):
            if isinstance(value, bool) and bool not in types:
                return message
            if int in types and isinstance(value, float) and value.is_integer():
                return None  # 2.0 is an integer in JSON Schema; DRF makes it 2
            return None if isinstance(value, types) else message
    return None


class StrictSerializerMixin:
    """A JSON body as the schema states it: unknown keys are an error (a typo such as
    ``delay`` must not be silently ignored), and so is a value of the wrong JSON type."""

    fields: Any

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["unknown field"] for name in unknown})
            wrong = {
                name: [message]
                for name, value in data.items()
                if (message := json_type_error(self.fields[name], value)) is not None
            }
            if wrong:
                raise serializers.ValidationError(wrong)
        return super().to_internal_value(data)  # type: ignore[misc]


# The numeric bounds come from the model fields' validators (tasks_app.vocabulary.validation's
# NUMERIC_BOUNDS), which DRF turns into min_value/max_value, so the OpenAPI document shows
# them; the queue rule is stated here for the same reason (the services check it again for
# the admin and the CLI). An interval longer than TASKS_MAX_DELAY_SECONDS but within the
# field's bound is refused by the services, in the words the admin and the CLI use.
def length_of(name: str) -> MaxLengthValidator:
    """Django's length validator of the task field ``name`` (its message is the admin's)."""
    field = Task._meta.get_field(name)
    assert isinstance(field, models.CharField) and field.max_length is not None
    return MaxLengthValidator(field.max_length)


TASK_FIELD_KWARGS: dict[str, dict[str, Any]] = {
    "queue": {"validators": [length_of("queue"), validation.check_queue]},
}


class TaskFieldsSerializer(StrictSerializerMixin, serializers.ModelSerializer):
    """The writable task fields (``services.TASK_FIELDS``)."""

    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.DateTimeField: AwareDateTimeField,
        models.JSONField: JSONObjectField,
    }

    class Meta:
        model = Task
        fields: tuple[str, ...] = TASK_FIELDS
        extra_kwargs: dict[str, dict[str, Any]] = TASK_FIELD_KWARGS

    def build_standard_field(
        self, field_name: str, model_field: Any
    ) -> tuple[type, dict[str, Any]]:
        """A text field's length is checked by Django's own validator (the OpenAPI document
        still states it): a text too long is worded as the admin and the CLI word it, not in
        DRF's sentence of its own."""
        field_class, kwargs = super().build_standard_field(field_name, model_field)
        limit = kwargs.pop("max_length", None)
        if limit is not None:
            kwargs["validators"] = [*kwargs.get("validators", []), MaxLengthValidator(limit)]
        return field_class, kwargs


class TaskCreateSerializer(TaskFieldsSerializer):
    """A new task. ``delay_seconds`` or ``run_at`` (with ``schedule_type`` left at ``none``)
    also schedules its one run in the same call; ``run_at`` with ``schedule_type: once`` is
    the task's own one-time schedule instead."""

    delay_seconds = seconds_field(
        "One run after this many seconds (0 .. TASKS_MAX_DELAY_SECONDS).", required=False
    )
    expires_in_seconds = seconds_field(
        "The one run expires if it cannot start this long after its due time.", required=False
    )
    expires_at = AwareDateTimeField(
        required=False, help_text="The one run expires at this instant."
    )

    class Meta(TaskFieldsSerializer.Meta):
        fields: tuple[str, ...] = (
            "id",
            *TASK_FIELDS,
            "delay_seconds",
            "expires_in_seconds",
            "expires_at",
        )
        extra_kwargs = {
            **TASK_FIELD_KWARGS,
            "id": {"required": False, "validators": [length_of("id"), task_id_validator]},
            "action": {"required": True},
        }

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        kind = attrs.get("schedule_type", ScheduleType.NONE)
        if "delay_seconds" in attrs and attrs.get("run_at") is not None:
            raise serializers.ValidationError(
                {"delay_seconds": [validation.not_both("delay_seconds", "run_at")]}
            )
        if kind == ScheduleType.ONCE and "delay_seconds" in attrs:
            raise serializers.ValidationError(
                {
                    "delay_seconds": [
                        "a 'once' task runs at its run_at; do not also give delay_seconds"
                    ]
                }
            )
        return attrs


class UniqueCallSerializer(serializers.Serializer):
    """A call's uniqueness key (docs/flow-control.md); the service checks it again
    (``services.unique_calls.unique_call``) in the same words."""

    _for = validation.NUMERIC_BOUNDS["unique_for_seconds"]
    unique_key = serializers.CharField(
        required=False,
        trim_whitespace=False,
        max_length=validation.UNIQUE_KEY_MAX_LENGTH,
        error_messages={
            "blank": "must be a non-empty text",
            "max_length": f"must be at most {validation.UNIQUE_KEY_MAX_LENGTH} characters",
        },
        help_text="While a run of the task made with this key waits, this call gets that "
        "run (200, deduplicated true) instead of a new one (202), or replaces it "
        "(on_duplicate 'replace'). Unset: the task's unique_on policy, if any.",
    )
    unique_for_seconds = serializers.IntegerField(
        required=False,
        min_value=_for.low,
        max_value=_for.high,
        error_messages={
            "min_value": validation.between(_for.low, _for.high),
            "max_value": validation.between(_for.low, _for.high),
        },
        help_text="With 'return': the key is also held this many seconds after the call that "
        "made its run, whatever became of it. With 'replace' (debounce): the new run is due "
        "no sooner than this many seconds after the call. Default 0.",
    )
    on_duplicate = serializers.ChoiceField(
        required=False,
        choices=validation.ON_DUPLICATE_CHOICES,
        error_messages={
            "invalid_choice": "must be one of "
            + ", ".join(validation.ON_DUPLICATE_CHOICES)
            + " (got '{input}')"
        },
        help_text="'return' (default): get the waiting run; 'replace': cancel it (its error "
        "names the new run) and make a new run.",
    )

    UNIQUE_FIELDS = ("unique_key", "unique_for_seconds", "on_duplicate")


class ScheduleSerializer(StrictSerializerMixin, UniqueCallSerializer):
    """Either one run (``delay_seconds`` or ``run_at``, optional expiry) or a recurring
    schedule (``schedule_type`` ``interval``/``cron`` with its fields)."""

    delay_seconds = seconds_field("One run after this many seconds.", required=False)
    run_at = AwareDateTimeField(required=False, help_text="One run at this instant.")
    expires_in_seconds = seconds_field(
        "The run expires if it cannot start this long after its due time.", required=False
    )
    expires_at = AwareDateTimeField(required=False)
    schedule_type = serializers.ChoiceField(choices=RECURRING_SCHEDULE_CHOICES, required=False)
    interval_seconds = serializers.IntegerField(
        required=False,
        min_value=validation.NUMERIC_BOUNDS["interval_seconds"].low,
        max_value=validation.NUMERIC_BOUNDS["interval_seconds"].high,
    )
    cron = serializers.CharField(required=False, validators=[length_of("cron")])
    timezone = serializers.CharField(required=False, validators=[length_of("timezone")])
    start_at = AwareDateTimeField(required=False, allow_null=True)
    end_at = AwareDateTimeField(required=False, allow_null=True)

    ONE_OFF = (
        "delay_seconds",
        "run_at",
        "expires_in_seconds",
        "expires_at",
        *UniqueCallSerializer.UNIQUE_FIELDS,
    )
    RECURRING = ("schedule_type", "interval_seconds", "cron", "timezone", "start_at", "end_at")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        one_off = [k for k in self.ONE_OFF if k in attrs]
        recurring = [k for k in self.RECURRING if k in attrs]
        if one_off and recurring:
            raise serializers.ValidationError(
                {
                    recurring[0]: [
                        "give a one-off run (delay_seconds/run_at) or a recurring schedule, not both"
                    ]
                }
            )
        if recurring and "schedule_type" not in attrs:
            raise serializers.ValidationError(
                {"schedule_type": ["is required for a recurring schedule"]}
            )
        if not recurring and "delay_seconds" not in attrs and "run_at" not in attrs:
            raise serializers.ValidationError(
                {"delay_seconds": [f"{validation.ONE_RUN_WHEN} (or a recurring schedule_type)"]}
            )
        return attrs


class PauseSerializer(StrictSerializerMixin, serializers.Serializer):
    note = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=validation.PAUSE_NOTE_MAX_LENGTH,
        error_messages={"max_length": validation.PAUSE_NOTE_TOO_LONG},
        help_text="Why the task is paused (optional; shown on the overview).",
    )


class RunNowSerializer(StrictSerializerMixin, UniqueCallSerializer):
    """Run the task now; with ``payload``, with that payload instead of the task's."""

    payload = JSONObjectField(
        required=False,
        help_text="This run's own payload (checked against the action's schema, as the "
        "task's would be); a masked secret field keeps the task's value. Unset: the task's.",
    )


class EmptySerializer(StrictSerializerMixin, serializers.Serializer):
    pass


class QueuePauseSerializer(StrictSerializerMixin, serializers.Serializer):
    note = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=validation.PAUSE_NOTE_MAX_LENGTH,
        error_messages={"max_length": validation.PAUSE_NOTE_TOO_LONG},
        help_text="Why the queue is paused (optional; shown on the overview).",
    )


class BackfillSerializer(StrictSerializerMixin, serializers.Serializer):
    start = AwareDateTimeField(help_text="Fires after this instant ...")
    end = AwareDateTimeField(help_text="... up to and including this one.")

    def validate_start(self, value: Any) -> Any:
        return _instant(value, "start")

    def validate_end(self, value: Any) -> Any:
        return _instant(value, "end")


def _instant(value: Any, field: str) -> Any:
    try:
        return validation.check_instant(value, field=field)
    except DjangoValidationError as exc:
        raise serializers.ValidationError(exc.message_dict[field]) from None


class BackfillResultSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    runs = RunOutputSerializer(many=True)


class PreviewQuerySerializer(serializers.Serializer):
    count = serializers.IntegerField(
        required=False,
        default=5,
        min_value=1,
        max_value=MAX_PREVIEW,
        error_messages={
            "min_value": validation.between(1, MAX_PREVIEW),
            "max_value": validation.between(1, MAX_PREVIEW),
        },
    )


class FireSerializer(serializers.Serializer):
    utc = serializers.DateTimeField()
    local = serializers.CharField(help_text="The same instant in the task's time zone (ISO 8601).")


class PreviewSerializer(serializers.Serializer):
    task = serializers.CharField()
    timezone = serializers.CharField()
    fires = FireSerializer(many=True)


class ActionSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    schema = JSONObjectField(help_text="JSON Schema of the payload.")
    permission = serializers.CharField(
        allow_null=True,
        help_text="The permission a user needs to create, change or run a task with this "
        "action (null: none beyond the task permissions).",
    )


def action_data(action: actions.Action) -> dict[str, Any]:
    return {
        "name": action.name,
        "description": action.description,
        "schema": action.schema,
        "permission": action.permission,
    }


class CheckSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    latency_ms = serializers.FloatField()
    error = serializers.CharField(required=False)


class HealthSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "down"])
    down = serializers.ListField(
        child=serializers.CharField(), help_text="Names of failing checks."
    )
    error = serializers.CharField(required=False)
    database = CheckSerializer()
    broker = CheckSerializer()
    cache = CheckSerializer()
    beat = CheckSerializer(help_text="Also last_tick (ISO 8601) and age_seconds.")
    workers = CheckSerializer(help_text="Also count: workers that answered a ping.")
    clock = CheckSerializer(
        help_text="Informational (does not make health 503): whether the host clock of every "
        "process (this web process, beat, each worker) is within bound_seconds of the "
        "database's, which the system keeps to. With the details permission, also processes "
        "(name: seconds ahead of the database, negative behind) and skewed (their names)."
    )
    alarms = serializers.IntegerField(
        allow_null=True,
        help_text="Tasks in missed-run alarm (informational: does not make health 503); "
        "null while the database is down.",
    )


# -- list filters (query parameters) ------------------------------------------------------


class TaskFilterSerializer(serializers.Serializer):
    status = serializers.MultipleChoiceField(
        choices=TaskStatus.choices, required=False, help_text="Repeat for several."
    )
    action = serializers.CharField(required=False, max_length=100)
    schedule_type = serializers.MultipleChoiceField(choices=ScheduleType.choices, required=False)
    paused = serializers.BooleanField(required=False, allow_null=True, default=None)
    search = serializers.CharField(required=False, max_length=200, help_text="In id and name.")
    next_run_after = AwareDateTimeField(required=False)
    next_run_before = AwareDateTimeField(required=False)
    created_after = AwareDateTimeField(required=False)
    created_before = AwareDateTimeField(required=False)


class RunFilterSerializer(serializers.Serializer):
    status = serializers.MultipleChoiceField(
        choices=RunStatus.choices, required=False, help_text="Repeat for several."
    )
    trigger = serializers.MultipleChoiceField(choices=Trigger.choices, required=False)
    action = serializers.CharField(
        required=False, max_length=100, help_text="The action the runs were made with."
    )
    task = serializers.CharField(required=False, max_length=100)
    requested_by = serializers.CharField(
        required=False,
        max_length=250,
        help_text="Who asked for the runs: a user name, or beat, schedule:<module>, code, "
        "retry:<run id>.",
    )
    due_after = AwareDateTimeField(required=False)
    due_before = AwareDateTimeField(required=False)
    created_after = AwareDateTimeField(required=False)
    created_before = AwareDateTimeField(required=False)
    started_after = AwareDateTimeField(required=False)
    started_before = AwareDateTimeField(required=False)
    finished_after = AwareDateTimeField(required=False)
    finished_before = AwareDateTimeField(required=False)
