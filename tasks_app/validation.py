"""Input rules shared by every entry point (admin forms, API, CLI, services).

Each check raises Django's ``ValidationError`` keyed by the field it is about, so the admin
shows it next to the field, the API returns it in ``detail`` and the CLI prints it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.utils import timezone

from . import actions
from .choices import ScheduleType
from .conf import app_settings
from .timing import scheduling

if TYPE_CHECKING:
    from .models import Task

# --- numeric bounds -------------------------------------------------------------------------
# Every number a task carries has a range that its integer column and Python's date
# arithmetic (years 1..9999) can hold. The model fields take their validators from here
# (so the admin form, the API serializers and the services refuse the same values with the
# same message), and the database enforces the same ranges with CHECK constraints.

# Durations (seconds) that are added to or subtracted from instants: at most a year
# (catchup_window_seconds 10**15 overflowed date arithmetic). A fixed bound, not
# TASKS_MAX_DELAY_SECONDS: the defaults (catchup window one hour) must stay valid however short
# a deployment sets its maximum delay.
MAX_DURATION_SECONDS = 366 * 86400
MAX_JITTER_SECONDS = 86400
# An integer column (Postgres ``integer``) holds at most this.
MAX_INTEGER = 2**31 - 1


@dataclass(frozen=True)
class Bounds:
    low: int
    high: int
    why: str


NUMERIC_BOUNDS: dict[str, Bounds] = {
    "priority": Bounds(0, 9, "the broker's priority levels"),
    "max_retries": Bounds(0, 100, "retries of one run"),
    "retry_backoff_seconds": Bounds(0, MAX_DURATION_SECONDS, "366 days"),
    "timeout_seconds": Bounds(1, MAX_DURATION_SECONDS, "366 days"),
    "expires_after_seconds": Bounds(1, MAX_DURATION_SECONDS, "366 days"),
    # The upper bound is TASKS_MAX_DELAY_SECONDS too (checked in validate_task: a setting).
    "interval_seconds": Bounds(1, MAX_DURATION_SECONDS, "366 days"),
    "max_runs": Bounds(1, MAX_INTEGER, "an integer column"),
    "jitter_seconds": Bounds(0, MAX_JITTER_SECONDS, "one day"),
    "catchup_window_seconds": Bounds(0, MAX_DURATION_SECONDS, "366 days"),
    "pause_after_failures": Bounds(1, 10_000, "consecutive failures"),
    "alert_after_seconds": Bounds(1, MAX_DURATION_SECONDS, "366 days"),
    # Retention: a cutoff further back than the date arithmetic reaches overflowed there.
    "keep_runs_days": Bounds(1, 36_525, "100 years"),
    "keep_runs_count": Bounds(1, MAX_INTEGER, "an integer column"),
}


def bounds_validators(name: str) -> list[MinValueValidator | MaxValueValidator]:
    """The model field validators of ``NUMERIC_BOUNDS[name]`` (DRF reads them as the
    serializer's ``min_value``/``max_value``, so the OpenAPI schema shows them too)."""
    bounds = NUMERIC_BOUNDS[name]
    return [MinValueValidator(bounds.low), MaxValueValidator(bounds.high)]


def bounds_constraints(table: str) -> list[models.BaseConstraint]:
    """One CHECK constraint per bounded column (NULL passes: the field is optional). The
    services do not ask Django to evaluate them before a save (one query each): the field
    validators above state the same ranges."""
    return [
        models.CheckConstraint(
            condition=models.Q(**{f"{name}__isnull": True})
            | models.Q(**{f"{name}__gte": b.low, f"{name}__lte": b.high}),
            name=f"{table}_{name}_range",
            violation_error_message=f"{name} must be between {b.low} and {b.high}",
        )
        for name, b in NUMERIC_BOUNDS.items()
    ]


# Instants a schedule may name: from the Unix epoch to 100 years ahead. Wider ones are
# refused here rather than overflowing date arithmetic later (a start_at in year 9999 made
# the next-fire computation, and the preview, fail with a 500).
EARLIEST_INSTANT = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_AHEAD = timedelta(days=36525)

# --- text and JSON -------------------------------------------------------------------------
# What Postgres cannot store, or Python cannot walk, is refused as bad input naming the
# field (and, inside a payload, the path), rather than failing at the INSERT with a 500:
# - U+0000 (NUL): Postgres text and jsonb cannot hold it;
# - a lone surrogate ("\ud800", a legal JSON escape, and what Python makes of bytes that are
#   not UTF-8 in a command-line argument): it cannot be encoded as UTF-8 for the database;
# - JSON nested deeper than MAX_JSON_DEPTH levels: deep enough for any payload, shallow
#   enough that validation and serialization never reach Python's recursion limit.
MAX_JSON_DEPTH = 32
TEXT_FIELDS = ("id", "name", "description", "action", "queue", "cron", "timezone", "pause_note")


def string_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored as it is, or None."""
    if "\x00" in text:
        return "must not contain NUL (\\u0000) characters"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "must not contain lone surrogates (\\ud800-\\udfff): they are not Unicode text"
    return None


def json_problem(value: Any, path: str = "", depth: int = 0) -> tuple[str, str] | None:
    """The first ``(where, what)`` that makes a parsed JSON value unstorable, or None.

    ``where`` is a dotted path (``payload.items.0``); nesting too deep is reported at the
    top-level field it is under (``""`` for the value itself)."""
    if depth > MAX_JSON_DEPTH:
        return path.split(".")[0], f"nests deeper than {MAX_JSON_DEPTH} levels"
    if isinstance(value, str):
        problem = string_problem(value)
        return None if problem is None else (path, problem)
    if isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            problem = string_problem(str(key))
            if problem is not None:
                return path, f"keys {problem}"
            found = json_problem(item, where, depth + 1)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = json_problem(item, f"{path}.{index}" if path else str(index), depth + 1)
            if found is not None:
                return found
    return None


def string_problem_of(value: Any) -> str | None:
    return string_problem(value) if isinstance(value, str) else None


def check_text(value: Any, *, field: str) -> None:
    """Refuse a string the database cannot store (``ValidationError`` naming ``field``)."""
    if (problem := string_problem_of(value)) is not None:
        raise ValidationError({field: [problem]})


# --- queues ---------------------------------------------------------------------------------
# Queue names every transport takes as they are (a name is also a file name on Kombu's
# filesystem transport and a routing key elsewhere): no '/', '\\', whitespace or control
# characters, and not '.' or '..'; 'amq.' is RabbitMQ's reserved prefix.
QUEUE_NAME_RE = r"^(?!amq\.)(?!\.\.?\Z)[^\s/\\\x00-\x1f\x7f]+\Z"
queue_name_validator = RegexValidator(
    QUEUE_NAME_RE,
    "No spaces, '/', '\\' or control characters; not '.' or '..', and not starting with "
    "'amq.' (reserved by RabbitMQ).",
)


def configured_queues() -> list[str]:
    """The queues a task may name: ``TASKS_QUEUES`` (the queues the workers consume)."""
    return list(app_settings.QUEUES)


def check_queue(value: str) -> None:
    """A queue name the broker takes and a worker consumes (in ``TASKS_QUEUES``); a run
    sent anywhere else would wait forever."""
    queue_name_validator(value)
    allowed = configured_queues()
    if value not in allowed:
        raise ValidationError(
            f"{value!r} is not a configured queue; configured (TASKS_QUEUES): {', '.join(allowed)}"
        )


def _human(seconds: float) -> str:
    days = seconds / 86400
    return f"{days:g} days" if days >= 1 else f"{seconds:g} s"


def max_delay() -> timedelta:
    return timedelta(seconds=app_settings.MAX_DELAY_SECONDS)


def check_delay(delay_seconds: float, *, field: str = "delay_seconds") -> timedelta:
    """A delay must be a finite number of seconds in ``[0, TASKS_MAX_DELAY_SECONDS]``."""
    try:
        value = float(delay_seconds)
    except (TypeError, ValueError) as exc:
        raise ValidationError({field: ["must be a number of seconds"]}) from exc
    if value != value or value in (float("inf"), float("-inf")):
        raise ValidationError({field: ["must be a finite number of seconds"]})
    if value < 0:
        raise ValidationError({field: ["must not be negative"]})
    if value > app_settings.MAX_DELAY_SECONDS:
        raise ValidationError(
            {
                field: [
                    f"must be at most {_human(app_settings.MAX_DELAY_SECONDS)} (TASKS_MAX_DELAY_SECONDS)"
                ]
            }
        )
    return timedelta(seconds=value)


def check_run_at(run_at: datetime, *, now: datetime, field: str = "run_at") -> datetime:
    """``run_at`` must be aware, not in the past beyond a small grace, nor too far ahead."""
    if timezone.is_naive(run_at):
        raise ValidationError({field: ["must include a time-zone offset (e.g. 'Z' or '+02:00')"]})
    grace = timedelta(seconds=app_settings.RUN_AT_GRACE_SECONDS)
    if run_at < now - grace:
        raise ValidationError(
            {field: [f"is in the past ({run_at.isoformat()}); give a future instant"]}
        )
    if run_at > now + max_delay():
        raise ValidationError(
            {
                field: [
                    f"is more than {_human(app_settings.MAX_DELAY_SECONDS)} ahead (TASKS_MAX_DELAY_SECONDS)"
                ]
            }
        )
    return run_at


def check_instant(value: datetime, *, field: str, now: datetime | None = None) -> datetime:
    """An aware instant between ``EARLIEST_INSTANT`` and ``LATEST_AHEAD`` from now."""
    if timezone.is_naive(value):
        raise ValidationError({field: ["must include a time-zone offset (e.g. 'Z' or '+02:00')"]})
    latest = (now or timezone.now()) + LATEST_AHEAD
    if not EARLIEST_INSTANT <= value <= latest:
        raise ValidationError(
            {field: [f"must be between 1970-01-01 and {latest.year - 1}-12-31 (UTC)"]}
        )
    return value


def check_stored_schedule(task: Task, *, now: datetime) -> None:
    """What the schedule arithmetic needs of a task as it is (stored, maybe before today's
    rules): a known zone, a cron that parses, instants within the range. Raises
    ``ValidationError`` naming the field, so a preview answers 400, not 500."""
    errors: dict[str, list[str]] = {}
    try:
        scheduling.get_zone(task.timezone or "UTC")
    except scheduling.ZoneError as exc:
        errors["timezone"] = [str(exc)]
    if task.schedule_type == ScheduleType.CRON:
        try:
            scheduling.parse_cron(task.cron)
        except scheduling.CronError as exc:
            errors["cron"] = [f"invalid cron expression: {exc}"]
    instants = {name: getattr(task, name) for name in ("start_at", "end_at", "run_at")}
    if task.schedule_type != ScheduleType.ONCE:
        del instants["run_at"]
    if not task._state.adding:  # a stored task's next fire, as beat will plan from it
        instants["next_run_at"] = task.state.next_run_at
    for name, value in instants.items():
        if value is not None:
            try:
                check_instant(value, field=name, now=now)
            except ValidationError as exc:
                errors[name] = list(exc.messages)
    if errors:
        raise ValidationError(errors)


def check_runnable(task: Task) -> None:
    """A stored task may be run: its queue is one a worker consumes (``TASKS_QUEUES`` may
    have changed since it was saved, or the row predates the queue rules)."""
    try:
        check_queue(task.queue)
    except ValidationError as exc:
        raise ValidationError(
            {"queue": [f"{m.rstrip('.')}; edit the task's queue to run it" for m in exc.messages]}
        ) from exc


def check_expiry(
    *, expires_in_seconds: float | None, expires_at: datetime | None, due_at: datetime
) -> datetime | None:
    """The deadline after which a not-yet-started run is expired instead of run late."""
    if expires_in_seconds is not None and expires_at is not None:
        raise ValidationError(
            {"expires_at": ["give either expires_in_seconds or expires_at, not both"]}
        )
    if expires_in_seconds is not None:
        return due_at + check_delay(expires_in_seconds, field="expires_in_seconds")
    if expires_at is not None:
        check_instant(expires_at, field="expires_at")
        if expires_at <= due_at:
            raise ValidationError({"expires_at": ["must be after the run's due time"]})
    return expires_at


def validate_task(
    task: Task, *, now: datetime | None = None, stored: tuple[Any, str] | None = None
) -> None:
    """Check the rules that span fields: action, payload schema, schedule, time zone.

    ``stored`` is the saved task's ``(run_at, schedule_type)`` (``None`` for a new task): an
    unchanged ``once`` instant is not checked against the clock again.
    """
    errors: dict[str, list[str]] = {}
    now = now or timezone.now()

    for name in TEXT_FIELDS:
        if (problem := string_problem_of(getattr(task, name))) is not None:
            errors[name] = [problem]
    found = json_problem(task.payload, "payload")
    if found is not None:  # reported on the field (a form has no "payload.items.0")
        where, what = found
        errors["payload"] = [what if where == "payload" else f"at {where}: {what}"]
        raise ValidationError(errors)  # nothing below may walk or store such a payload
    if errors:
        raise ValidationError(errors)

    try:
        action = actions.get(task.action)
    except KeyError:
        known = ", ".join(a.name for a in actions.all_actions())
        errors["action"] = [f"unknown action {task.action!r}; known actions: {known}"]
    else:
        if not isinstance(task.payload, dict):
            errors["payload"] = ["must be a JSON object"]
        else:
            try:
                action.validate(task.payload)
            except actions.PayloadError as exc:
                errors["payload"] = [
                    f"does not fit action {task.action!r}: {m}" for m in exc.messages
                ]

    try:
        scheduling.get_zone(task.timezone)
    except scheduling.ZoneError as exc:
        errors["timezone"] = [str(exc)]

    kind = task.schedule_type
    if kind == ScheduleType.ONCE:
        if task.run_at is None:
            errors["run_at"] = ["is required for a 'once' schedule"]
        elif stored != (task.run_at, task.schedule_type):
            try:
                check_run_at(task.run_at, now=now)
            except ValidationError as exc:
                errors.update(exc.message_dict)
    elif kind == ScheduleType.INTERVAL:
        if not task.interval_seconds:
            errors["interval_seconds"] = ["is required for an 'interval' schedule (at least 1)"]
        elif (
            app_settings.MAX_DELAY_SECONDS
            < task.interval_seconds
            <= NUMERIC_BOUNDS["interval_seconds"].high  # above: the field's own validator
        ):
            errors["interval_seconds"] = [
                f"must be at most {app_settings.MAX_DELAY_SECONDS:g} s (TASKS_MAX_DELAY_SECONDS)"
            ]
    elif kind == ScheduleType.CRON:
        if not task.cron:
            errors["cron"] = ["is required for a 'cron' schedule"]
        else:
            try:
                scheduling.parse_cron(task.cron)
            except scheduling.CronError as exc:
                errors["cron"] = [f"invalid cron expression: {exc}"]
    elif kind != ScheduleType.NONE:
        errors["schedule_type"] = [f"must be one of {', '.join(ScheduleType.values)}"]

    for name in ("start_at", "end_at"):
        value = getattr(task, name)
        if value is not None:
            try:
                check_instant(value, field=name, now=now)
            except ValidationError as exc:
                errors.update(exc.message_dict)
    bad_bounds = bool(errors.keys() & {"start_at", "end_at"})
    if not bad_bounds and task.start_at and task.end_at and task.end_at <= task.start_at:
        errors["end_at"] = ["must be after start_at"]
    if not isinstance(task.queue, str) or not task.queue:
        errors["queue"] = ["is required"]
    elif "queue" not in errors:
        try:
            check_queue(task.queue)
        except ValidationError as exc:
            errors["queue"] = list(exc.messages)
    if (
        kind == ScheduleType.INTERVAL
        and task.interval_seconds
        and task.jitter_seconds
        and task.jitter_seconds >= task.interval_seconds
    ):
        errors["jitter_seconds"] = ["must be shorter than interval_seconds"]

    if errors:
        raise ValidationError(errors)


def too_deep_at(text: str) -> str | None:
    """The top-level key of the JSON object ``text`` whose value nests deeper than
    ``MAX_JSON_DEPTH`` (the field :func:`json_problem` names), found without recursion;
    ``None`` when the culprit is not under a key of a top-level object."""
    depth, in_string, escaped = 0, False, False
    last = ""  # the last character outside strings that is not white space
    key_start, key = -1, None
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string, last = False, '"'
                if key_start >= 0:
                    key, key_start = text[key_start:index], -1
        elif char == '"':
            in_string = True
            if depth == 1 and last in "{,":
                key_start = index + 1
        elif not char.isspace():
            last = char
            if char in "{[":
                depth += 1
                if depth > MAX_JSON_DEPTH + 1:
                    return key
            elif char in "}]":
                depth -= 1
    return None
