"""Reads about tasks: lists, the schedule preview, alarms. No writes here."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Max, Q, QuerySet

from .. import store
from ..models import Run, RunStatus, ScheduleType, Task, TaskStatus, Trigger
from ..runtime import clock
from ..timing import policies, scheduling
from ..timing.task_schedule import first_fire, policy_of, schedule_of
from ..vocabulary import validation

MAX_PREVIEW = 100
# The most fires beat counts per read when preparing a busy instant (beat.fire_ahead).
FIRES_COUNTED = 500_000
# List filters on a time range: ``<name>_after`` (inclusive) / ``<name>_before`` (exclusive).
TASK_RANGES = {"next_run": "state__next_run_at", "created": "created_at"}


# A paused task's next run, in words, wherever one is shown (admin, CLI): short in a list.
NEXT_RUN_PAUSED = "none while paused (resume to continue)"
NEXT_RUN_PAUSED_SHORT = "none: paused"


def task_next_run_at(task: Task) -> datetime | None:
    """The task's next run as every view shows it: ``None`` while the task is paused (it
    fires nothing and holds its delayed runs; resuming recomputes the next fire), otherwise
    the stored ``next_run_at``."""
    return None if task.paused else task.state.next_run_at


def paused_filter(*, paused: bool) -> Q:
    """The tasks paused (``paused``), or those not paused: a task is paused when its state
    row's status is ``paused``, the one home of the pause."""
    condition = Q(state__status=TaskStatus.PAUSED)
    return condition if paused else ~condition


def task_list(
    *,
    status: list[str] | None = None,
    action: str | None = None,
    schedule_type: list[str] | None = None,
    paused: bool | None = None,
    search: str | None = None,
    **ranges: datetime | None,
) -> QuerySet[Task]:
    """Tasks by id, filtered (each filter optional; ``ranges`` as in :data:`TASK_RANGES`)."""
    qs = Task.objects.select_related("state")
    if status:
        qs = qs.filter(state__status__in=status)
    if action:
        qs = qs.filter(action=action)
    if schedule_type:
        qs = qs.filter(schedule_type__in=schedule_type)
    if paused is not None:
        qs = qs.filter(paused_filter(paused=paused))
    if search:
        qs = qs.filter(Q(id__icontains=search) | Q(name__icontains=search))
    return in_ranges(qs, TASK_RANGES, ranges).order_by("id")


# The task columns whose values in use a list filter offers, each read through its index.
# The columns whose values in use the admin's filters offer, each with the index that
# serves them: {(table, column): index}.
VALUES_IN_USE = {
    ("tasks_app_task", "action"): "task_action_idx",
    ("tasks_app_task", "queue"): "task_queue_idx",
    # django-celery-beat's entries: the Celery task each calls (migration 0022)
    ("django_celery_beat_periodictask", "task"): "tasks_app_entry_task_idx",
}


def values_in_use(table: str, column: str) -> list[str]:
    """The distinct values of ``column`` of ``table`` (one of :data:`VALUES_IN_USE`), in
    order: what the admin's filters on such a column offer. One index probe per value, so
    the cost follows the number of distinct values, not of rows."""
    if (table, column) not in VALUES_IN_USE:
        raise ValueError(f"no index serves the values of {column!r} in {table}")
    return store.values_in_use(table, column)


def in_ranges(qs: QuerySet[Any], columns: dict[str, str], ranges: dict[str, Any]) -> QuerySet[Any]:
    """``qs`` limited by ``<name>_after`` / ``<name>_before`` bounds on ``columns[name]``."""
    unknown = set(ranges) - {f"{n}_{side}" for n in columns for side in ("after", "before")}
    if unknown:
        raise TypeError(f"unknown filters: {sorted(unknown)}")
    for name, column in columns.items():
        if ranges.get(f"{name}_after") is not None:
            qs = qs.filter(**{f"{column}__gte": ranges[f"{name}_after"]})
        if ranges.get(f"{name}_before") is not None:
            qs = qs.filter(**{f"{column}__lt": ranges[f"{name}_before"]})
    return qs


@dataclass(frozen=True)
class Fire:
    utc: datetime
    local: datetime


def task_preview(*, task: Task, count: int = 5, now: datetime | None = None) -> list[Fire]:
    """The next ``count`` fire instants of ``task``'s schedule, in UTC and in its zone.

    Works on an unsaved task too (the admin form previews before saving). A task with no
    recurring schedule previews its ``once`` instant, or nothing.

    A schedule that cannot be computed (a row stored before the bounds existed, with an
    instant near year 9999 or an unknown zone) raises ``ValidationError`` naming the field,
    never an arithmetic error.
    """
    now = now or clock.now()
    count = max(1, min(count, MAX_PREVIEW))
    stored_next = None if task._state.adding else task.state.next_run_at
    validation.check_stored_schedule(task, next_run_at=stored_next, now=now)
    try:
        return _preview(task, count=count, now=now)
    except (OverflowError, ValueError) as exc:  # CronError and ZoneError are ValueErrors
        raise ValidationError(
            {"schedule_type": [f"the stored schedule cannot be computed ({exc}); edit the task"]}
        ) from exc


def _preview(task: Task, *, count: int, now: datetime) -> list[Fire]:
    zone = scheduling.get_zone(task.timezone or "UTC")
    if task.schedule_type == ScheduleType.ONCE:
        fires = [task.run_at] if task.run_at and task.run_at > now else []
    else:
        # The schedule's end as beat decides it (policies): end_at, and max_runs less the
        # fires already recorded (none for a task not saved yet).
        policy = policy_of(task, fire_count=0 if task._state.adding else None)
        left = policies.fires_left(policy)
        count = count if left is None else min(count, left)
        stored = None if task._state.adding else task.state.next_run_at
        start = stored if stored and stored > now else first_fire(task, now=now)
        schedule = schedule_of(task, anchor=start) if start else None
        fires = (
            []
            if start is None or schedule is None or count == 0
            else [start, *scheduling.next_fires(schedule, start, count - 1)]
        )
        fires = [f for f in fires if not policies.past_end(f, policy)]
    return [Fire(utc=f, local=f.astimezone(zone)) for f in fires[:count]]


def tasks_in_alarm() -> QuerySet[Task]:
    """Tasks whose missed-run alarm is raised (see ``tasks_app.services.alarms``), oldest alarm first."""
    return (
        Task.objects.filter(state__alarm_since__isnull=False)
        .select_related("state")
        .order_by("state__alarm_since")
    )


def overdue_fire(task: Task, *, now: datetime) -> datetime | None:
    """The oldest fire instant of ``task`` that should have completed by ``now`` and has not."""
    assert task.alert_after_seconds is not None
    cutoff = now - timedelta(seconds=task.alert_after_seconds)
    last_ok = task.runs.filter(status=RunStatus.COMPLETED).aggregate(last=Max("scheduled_for"))[
        "last"
    ]
    unmet = Run.objects.filter(task=task, trigger=Trigger.SCHEDULE, scheduled_for__lte=cutoff)
    if last_ok is not None:
        unmet = unmet.filter(scheduled_for__gt=last_ok)
    first_unmet = (
        unmet.exclude(
            scheduled_for__in=Run.objects.filter(task=task, status=RunStatus.COMPLETED).values(
                "scheduled_for"
            )
        )
        .order_by("scheduled_for")
        .values_list("scheduled_for", flat=True)
        .first()
    )
    if first_unmet is not None:
        return first_unmet
    next_run_at = task.state.next_run_at
    if next_run_at is not None and next_run_at <= cutoff:
        return next_run_at  # beat never recorded this fire
    return None


def fires_due_per_second(
    *, until: datetime, limit: int = FIRES_COUNTED
) -> list[tuple[datetime, int]]:
    """Tasks whose next fire (not recorded yet) is due by ``until``, counted per second of
    that fire, in time order: what beat has to record soon (read to prepare a busy instant).
    Read from the state rows alone, through ``task_state_next_run_idx``: a delayed run's
    task counts too, which only makes the estimate cautious."""
    rows = store.fires_due_per_second(until=until, limit=limit)
    return [(second, fires) for second, fires in rows]
