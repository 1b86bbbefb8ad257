"""A task's schedule as pure values: its ``scheduling.Schedule``, its first fire, its policy
and the fires to record at an instant.

Pure: reads the fields of a ``Task`` it is given (saved or not), never the database or the
clock (``now`` is passed in). Used by the firing service, the schedule sync and the preview.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..conf import app_settings
from ..vocabulary.choices import ScheduleType
from . import policies, scheduling

if TYPE_CHECKING:
    from ..models import Task


def schedule_of(task: Task, *, anchor: datetime) -> scheduling.Schedule | None:
    """The pure schedule for a recurring task (interval fires align on ``anchor``)."""
    if task.schedule_type == ScheduleType.INTERVAL and task.interval_seconds:
        return scheduling.IntervalSchedule(seconds=task.interval_seconds, anchor=anchor)
    if task.schedule_type == ScheduleType.CRON and task.cron:
        return scheduling.CronSchedule.parse(task.cron, task.timezone)
    return None


def first_fire(task: Task, *, now: datetime) -> datetime | None:
    """When a (re)planned recurring schedule fires first: one interval from now (or at
    ``start_at`` when that is later), or the next cron match (at or after ``start_at``)."""
    after = max(now, task.start_at - timedelta(microseconds=1)) if task.start_at else now
    if task.schedule_type == ScheduleType.INTERVAL and task.interval_seconds:
        if task.start_at and task.start_at > now:
            return task.start_at
        return now + timedelta(seconds=task.interval_seconds)
    schedule = schedule_of(task, anchor=now)
    return schedule.next_fire(after) if schedule else None


def planned_fire(task: Task, *, now: datetime, fire_count: int) -> datetime | None:
    """The fire a saved schedule plans: :func:`first_fire`, or ``None`` when the schedule
    has ended by then with ``fire_count`` fires recorded (``policies.fire_within_bounds``)."""
    return policies.fire_within_bounds(
        first_fire(task, now=now), policy_of(task, fire_count=fire_count)
    )


def policy_of(task: Task, *, fire_count: int | None = None) -> policies.Policy:
    """The task's policy fields, with its recorded fires (``fire_count``, else its state
    row's)."""
    return policies.Policy(
        catchup=task.catchup,
        catchup_window=timedelta(seconds=task.catchup_window_seconds),
        grace=timedelta(seconds=app_settings.MISFIRE_GRACE_SECONDS),
        start_at=task.start_at,
        end_at=task.end_at,
        max_runs=task.max_runs,
        fire_count=task.state.fire_count if fire_count is None else fire_count,
    )


def fire_due_at(task: Task, fire: datetime) -> datetime:
    """When the run for ``fire`` is due: the instant plus the task's per-fire jitter (the
    same offset for the same fire, whichever beat computes it)."""
    return fire + policies.jitter_offset(task.id, fire, task.jitter_seconds)


def plan_task_fires(task: Task, *, now: datetime, lookahead: timedelta) -> policies.Plan:
    """The per-task decision: fires of ``task`` to record at ``now`` and its next fire.

    The task's schedule and policy fields go through :func:`tasks_app.timing.policies.plan_fires` —
    catch-up after downtime or a pause, ``start_at`` / ``end_at`` bounds and ``max_runs``.
    Fires up to ``now + lookahead`` are recorded ahead so they can be published with an
    exact ETA.
    """
    fire = task.state.next_run_at
    schedule = None if fire is None else schedule_of(task, anchor=fire)
    if fire is None or schedule is None:
        return policies.Plan(fires=(), missed=0, next_fire=None, finished=True)
    return policies.plan_fires(
        schedule, next_fire=fire, now=now, lookahead=lookahead, policy=policy_of(task)
    )
