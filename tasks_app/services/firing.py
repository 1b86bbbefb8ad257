"""Recurring fires, as recorded by the beat process."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from .. import dispatch, scheduling
from ..models import (
    RECURRING,
    Run,
    ScheduleType,
    Task,
    Trigger,
)
from .runs import new_run

log = logging.getLogger(__name__)


def schedule_fire_due(*, now: datetime, lookahead: timedelta, batch: int = 500) -> list[Run]:
    """Record a run for every recurring fire due by ``now + lookahead``; advance each task.

    The run rows and the tasks' next fire are written in one transaction, before anything is
    published, so a crash never loses a fire and ``UNIQUE (task, scheduled_for)`` makes a
    replayed tick (restart, a second beat) record nothing twice. Fires older than
    ``TASKS_MISFIRE_GRACE_SECONDS`` were missed (beat was down) and are skipped, not replayed.
    """
    grace = timedelta(seconds=settings.TASKS_MISFIRE_GRACE_SECONDS)
    created: list[Run] = []
    while True:
        with transaction.atomic():
            tasks = list(
                Task.objects.select_for_update(skip_locked=True)
                .filter(
                    schedule_type__in=RECURRING,
                    paused=False,
                    next_run_at__lte=now + lookahead,
                )
                .order_by("next_run_at")[:batch]
            )
            runs: list[Run] = []
            for task in tasks:
                fire = task.next_run_at
                assert fire is not None
                schedule = schedule_of(task, anchor=fire)
                if fire < now - grace:
                    log.warning("task %s missed its fire at %s; skipped", task.id, fire.isoformat())
                    task.next_run_at = schedule.next_fire(now) if schedule else None
                    continue
                runs.append(new_run(task, trigger=Trigger.SCHEDULE, due_at=fire, scheduled_for=fire))
                task.next_run_at = schedule.next_fire(fire) if schedule else None
            Run.objects.bulk_create(runs, ignore_conflicts=True)
            Task.objects.bulk_update(tasks, ["next_run_at"])
            fired_periodic = [t.periodic_task_id for t in tasks if t.periodic_task_id]
            if fired_periodic and runs:
                PeriodicTask.objects.filter(id__in=fired_periodic).update(
                    last_run_at=now, total_run_count=F("total_run_count") + 1
                )
            due_soon = [r.id for r in runs if r.due_at <= now + dispatch.horizon()]
            transaction.on_commit(lambda ids=due_soon: dispatch.publish_runs(ids))  # type: ignore[misc]
        created.extend(runs)
        if len(tasks) < batch:
            return created


def schedule_of(task: Task, *, anchor: datetime | None = None) -> scheduling.Schedule | None:
    """The pure schedule for a recurring task (interval fires align on ``anchor``)."""
    if task.schedule_type == ScheduleType.INTERVAL and task.interval_seconds:
        return scheduling.IntervalSchedule(
            seconds=task.interval_seconds, anchor=anchor or timezone.now()
        )
    if task.schedule_type == ScheduleType.CRON and task.cron:
        return scheduling.CronSchedule.parse(task.cron, task.timezone)
    return None


def first_fire(task: Task, *, now: datetime) -> datetime | None:
    """When a (re)planned recurring schedule fires first: one interval from now, or the
    next cron match."""
    if task.schedule_type == ScheduleType.INTERVAL and task.interval_seconds:
        return now + timedelta(seconds=task.interval_seconds)
    schedule = schedule_of(task, anchor=now)
    return schedule.next_fire(now) if schedule else None
