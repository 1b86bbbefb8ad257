"""The rules of a task that span fields or read what is stored: an action and its payload,
a schedule kind and the fields it needs, ``end_at`` after ``start_at``, jitter shorter than
the interval, a ``once`` instant checked against the clock only when it changes, a run's
expiry after its due time, a stored task that may still run.

They build on the field rules of ``tasks_app.vocabulary.validation`` (pure, also read by the models)
and word nothing of their own that a field rule already words. The services run them before
every write (:func:`task_check`); the admin form runs them to show each error next to its
field.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError

from .. import actions
from ..models import Task
from ..runtime import clock
from ..timing import scheduling
from ..vocabulary.choices import ScheduleType
from ..vocabulary.validation import (
    NEEDS_UNIQUE_ON,
    REQUIRED_FOR_SCHEDULE,
    check_delay,
    check_instant,
    check_interval,
    check_queue,
    check_run_at,
    cron_problem,
    not_both,
    storable_errors,
)
from . import django_task_paths

# A stored task's ``(run_at, schedule_type)``: an unchanged ``once`` instant is not checked
# against the clock again (it may have passed while the task waited).
StoredSchedule = tuple[datetime | None, str]


def stored_schedule_of(task: Task | None) -> StoredSchedule | None:
    return None if task is None else (task.run_at, task.schedule_type)


def task_check(task: Task, *, stored: StoredSchedule | None, now: datetime | None = None) -> None:
    """Every rule of ``task`` at once, as one ``ValidationError`` keyed by field: its fields'
    own (``Task.full_clean``: bounds, lengths, what Postgres can store) and those of
    :func:`validate_task`."""
    errors: dict[str, Any] = {}
    try:
        # The CHECK constraints repeat the field validators' bounds: not queried a second time.
        task.full_clean(validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        errors = exc.update_error_dict(errors)
    try:
        validate_task(task, stored=stored, now=now)
    except ValidationError as exc:
        errors = exc.update_error_dict(errors)
    if errors:
        raise ValidationError(errors)


def validate_task(
    task: Task, *, now: datetime | None = None, stored: StoredSchedule | None = None
) -> None:
    """Check the rules that span fields: action, payload schema, schedule, time zone.

    What Postgres cannot store is ``Task.clean``'s to report (a field rule): nothing here
    walks such a task. ``stored`` is the saved task's ``(run_at, schedule_type)`` (``None``
    for a new task).
    """
    if storable_errors(task):
        return
    errors: dict[str, list[str]] = {}
    now = now or clock.now()
    if (taken := django_task_paths.id_refusal(task)) is not None:
        errors["id"] = [taken]

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
    if kind in REQUIRED_FOR_SCHEDULE:
        field, required = REQUIRED_FOR_SCHEDULE[ScheduleType(kind)]
        if getattr(task, field) in (None, ""):
            errors[field] = [required]
        elif (
            kind == ScheduleType.ONCE
            and task.run_at is not None
            and stored != (task.run_at, task.schedule_type)
        ):
            try:
                check_run_at(task.run_at, now=now)
            except ValidationError as exc:
                errors.update(exc.message_dict)
        elif kind == ScheduleType.INTERVAL and isinstance(task.interval_seconds, int):
            try:
                check_interval(task.interval_seconds)
            except ValidationError as exc:
                errors.update(exc.message_dict)
        elif kind == ScheduleType.CRON:
            try:
                scheduling.parse_cron(task.cron)
            except scheduling.CronError as exc:
                errors["cron"] = [cron_problem(exc)]
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
    for name in ("concurrency_limit_per_key", "rate_limit_per_key"):
        if getattr(task, name) and not task.flow_key:
            errors[name] = ["needs flow_key: the payload field whose value is a run's key"]
    if not task.unique_on:  # a unique-call policy without its key would be ignored
        if task.debounce:
            errors["debounce"] = [NEEDS_UNIQUE_ON]
        if task.unique_for_seconds:
            errors["unique_for_seconds"] = [NEEDS_UNIQUE_ON]

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
        raise ValidationError({"expires_at": [not_both("expires_in_seconds", "expires_at")]})
    if expires_in_seconds is not None:
        return due_at + check_delay(expires_in_seconds, field="expires_in_seconds")
    if expires_at is not None:
        check_instant(expires_at, field="expires_at")
        if expires_at <= due_at:
            raise ValidationError({"expires_at": ["must be after the run's due time"]})
    return expires_at


__all__ = [
    "StoredSchedule",
    "check_expiry",
    "check_runnable",
    "stored_schedule_of",
    "task_check",
    "validate_task",
]
