"""Input rules shared by every entry point (admin forms, API, CLI, services).

Each check raises Django's ``ValidationError`` keyed by the field it is about, so the admin
shows it next to the field, the API returns it in ``detail`` and the CLI prints it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.utils import timezone

from . import actions, scheduling
from .choices import ScheduleType

if TYPE_CHECKING:
    from .models import Task

MAX_JITTER_SECONDS = 86400

# Instants a schedule may name: from the Unix epoch to 100 years ahead. Wider ones are
# refused here rather than overflowing date arithmetic later (a start_at in year 9999 made
# the next-fire computation, and the preview, fail with a 500).
EARLIEST_INSTANT = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_AHEAD = timedelta(days=36525)

# Durations (seconds) that are added to or subtracted from instants: at most a year
# (catchup_window_seconds 10**15 overflowed date arithmetic). A fixed bound, not
# TASKS_MAX_DELAY_SECONDS: the defaults (catchup window one hour) must stay valid however short
# a deployment sets its maximum delay.
MAX_DURATION_SECONDS = 366 * 86400
BOUNDED_SECONDS = (
    "retry_backoff_seconds",
    "timeout_seconds",
    "expires_after_seconds",
    "catchup_window_seconds",
    "alert_after_seconds",
)

# Queue names every transport takes as they are (a name is also a file name on Kombu's
# filesystem transport and a routing key elsewhere): no '/', '\\', whitespace or control
# characters, and not '.' or '..'; 'amq.' is RabbitMQ's reserved prefix.
QUEUE_NAME_RE = r"^(?!amq\.)(?!\.\.?\Z)[^\s/\\\x00-\x1f\x7f]+\Z"
queue_name_validator = RegexValidator(
    QUEUE_NAME_RE,
    "No spaces, '/', '\\' or control characters; not '.' or '..', and not starting with "
    "'amq.' (reserved by RabbitMQ).",
)


def _human(seconds: float) -> str:
    days = seconds / 86400
    return f"{days:g} days" if days >= 1 else f"{seconds:g} s"


def max_delay() -> timedelta:
    return timedelta(seconds=settings.TASKS_MAX_DELAY_SECONDS)


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
    if value > settings.TASKS_MAX_DELAY_SECONDS:
        raise ValidationError(
            {
                field: [
                    f"must be at most {_human(settings.TASKS_MAX_DELAY_SECONDS)} (TASKS_MAX_DELAY_SECONDS)"
                ]
            }
        )
    return timedelta(seconds=value)


def check_run_at(run_at: datetime, *, now: datetime, field: str = "run_at") -> datetime:
    """``run_at`` must be aware, not in the past beyond a small grace, nor too far ahead."""
    if timezone.is_naive(run_at):
        raise ValidationError({field: ["must include a time-zone offset (e.g. 'Z' or '+02:00')"]})
    grace = timedelta(seconds=settings.TASKS_RUN_AT_GRACE_SECONDS)
    if run_at < now - grace:
        raise ValidationError(
            {field: [f"is in the past ({run_at.isoformat()}); give a future instant"]}
        )
    if run_at > now + max_delay():
        raise ValidationError(
            {
                field: [
                    f"is more than {_human(settings.TASKS_MAX_DELAY_SECONDS)} ahead (TASKS_MAX_DELAY_SECONDS)"
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
        elif task.interval_seconds > settings.TASKS_MAX_DELAY_SECONDS:
            errors["interval_seconds"] = ["must not exceed TASKS_MAX_DELAY_SECONDS"]
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
    for name in BOUNDED_SECONDS:
        value = getattr(task, name)
        if value is not None and value > MAX_DURATION_SECONDS:
            errors[name] = [f"must be at most {MAX_DURATION_SECONDS} s (366 days)"]
    if not isinstance(task.queue, str) or not task.queue:
        errors["queue"] = ["is required"]
    else:
        try:
            queue_name_validator(task.queue)
        except ValidationError as exc:
            errors["queue"] = list(exc.messages)
    if task.jitter_seconds and task.jitter_seconds > MAX_JITTER_SECONDS:
        errors["jitter_seconds"] = [f"must be at most {MAX_JITTER_SECONDS} (one day)"]
    if (
        kind == ScheduleType.INTERVAL
        and task.interval_seconds
        and task.jitter_seconds
        and task.jitter_seconds >= task.interval_seconds
    ):
        errors["jitter_seconds"] = ["must be shorter than interval_seconds"]

    if errors:
        raise ValidationError(errors)
