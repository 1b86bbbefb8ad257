"""Tasks and their schedules: create, update, delete, pause, resume, run now, backfill."""

from __future__ import annotations

import json
import logging
import secrets
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

from .. import dispatch, scheduling, validation
from ..models import (
    ACTIVE_RUN_STATUSES,
    Run,
    RunStatus,
    ScheduleType,
    Task,
    TaskStatus,
    Trigger,
)
from .common import ConflictError, audit, next_run_at_expr, plain
from .firing import first_fire, schedule_of
from .runs import new_run, run_create

log = logging.getLogger(__name__)

EXECUTE_TASK = "tasks_app.execute_task"
SCHEDULE_FIELDS = ("schedule_type", "run_at", "interval_seconds", "cron", "timezone", "start_at")
EXECUTION_FIELDS = (
    "queue",
    "priority",
    "max_retries",
    "retry_backoff_seconds",
    "timeout_seconds",
    "expires_after_seconds",
)
POLICY_FIELDS = (
    "start_at",
    "end_at",
    "max_runs",
    "jitter_seconds",
    "overlap_policy",
    "catchup",
    "catchup_window_seconds",
    "pause_after_failures",
    "alert_after_seconds",
)
TASK_FIELDS = (
    "name",
    "description",
    "action",
    "payload",
    *EXECUTION_FIELDS,
    *SCHEDULE_FIELDS,
    *POLICY_FIELDS,
)


def task_create(*, id: str | None = None, by: str = "", **fields: Any) -> Task:
    """Create a task (and its schedule) after validating every field.

    ``id`` is user-supplied (slug characters) or generated. A duplicate id raises
    :class:`ConflictError`.
    """
    unknown = set(fields) - set(TASK_FIELDS)
    if unknown:
        raise ValidationError({name: ["unknown field"] for name in sorted(unknown)})
    task = Task(id=id or _generate_task_id(fields.get("action", "task")), **fields)
    if Task.objects.filter(pk=task.id).exists():
        raise ConflictError(f"a task with id {task.id!r} already exists")
    try:
        return task_save(task=task, by=by)
    except IntegrityError as exc:  # created concurrently between the check and the insert
        raise ConflictError(f"a task with id {task.id!r} already exists") from exc


def task_update(*, task: Task, data: dict[str, Any], by: str = "") -> Task:
    """Change the given fields of ``task``; schedule changes re-plan the next fire."""
    unknown = set(data) - set(TASK_FIELDS)
    if unknown:
        raise ValidationError({name: ["unknown or read-only field"] for name in sorted(unknown)})
    for name, value in data.items():
        setattr(task, name, value)
    return task_save(task=task, by=by)


def task_save(*, task: Task, by: str = "") -> Task:
    """Validate and persist ``task`` as built by a form or a service, then sync its schedule.

    Nothing is written when validation fails.
    """
    adding = task._state.adding
    previous = None if adding else Task.objects.filter(pk=task.pk).first()
    task.full_clean(validate_unique=False)
    now = timezone.now()
    with transaction.atomic():
        if adding:
            task.status = TaskStatus.PAUSED if task.paused else TaskStatus.CREATED
        task.save(force_insert=adding)
        schedule_changed = previous is None or any(
            getattr(previous, f) != getattr(task, f) for f in SCHEDULE_FIELDS
        )
        _sync_schedule(task, now=now, replan=schedule_changed)
        changes = {
            f: [plain(getattr(previous, f)) if previous else None, plain(getattr(task, f))]
            for f in TASK_FIELDS
            if previous is None or getattr(previous, f) != getattr(task, f)
        }
        if adding or changes:
            audit(task.id, "created" if adding else "updated", by=by, changes=changes)
    log.info("task %s %s by %s", task.id, "created" if adding else "updated", by or "-")
    return task


def task_delete(*, task: Task, by: str = "") -> None:
    """Delete the task, its beat entry and its runs (run history goes with the task; the
    audit trail stays)."""
    with transaction.atomic():
        audit(task.id, "deleted", by=by)
        periodic = task.periodic_task
        task.delete()
        if periodic is not None:
            periodic.delete()


def task_pause(*, task: Task, note: str = "", by: str = "") -> Task:
    """Stop new fires and hold the task's delayed runs until it is resumed."""
    with transaction.atomic():
        task.paused = True
        task.pause_note = note
        task.paused_at = timezone.now()
        task.paused_by = by
        task.status = TaskStatus.PAUSED
        task.save(
            update_fields=["paused", "pause_note", "paused_at", "paused_by", "status", "updated_at"]
        )
        # Fires already recorded ahead of their instant will not run: pausing stops fires.
        task.runs.filter(
            trigger=Trigger.SCHEDULE, status__in=[RunStatus.PENDING, RunStatus.QUEUED]
        ).update(status=RunStatus.SKIPPED, finished_at=task.paused_at, error="skipped: task paused")
        _sync_periodic_task(task)
        audit(task.id, "paused", by=by, note=note)
    return task


def task_resume(*, task: Task, by: str = "") -> Task:
    """Resume fires. Fires missed while paused go through the task's catch-up policy (the
    default ``skip`` replays none); held delayed runs are released."""
    now = timezone.now()
    with transaction.atomic():
        task.paused = False
        task.pause_note = ""
        task.paused_at = None
        task.paused_by = ""
        task.consecutive_failures = 0
        task.status = _idle_status(task)
        task.save(
            update_fields=[
                "paused",
                "pause_note",
                "paused_at",
                "paused_by",
                "status",
                "consecutive_failures",
                "updated_at",
            ]
        )
        _sync_schedule(task, now=now, replan=False)
        audit(task.id, "resumed", by=by)
    transaction.on_commit(dispatch.release_due_runs)
    return task


def task_backfill(*, task: Task, start: datetime, end: datetime, by: str = "") -> list[Run]:
    """One run for each fire of the task's schedule in ``(start, end]``, due now.

    Fires already recorded (by beat or an earlier backfill) are not recorded again. More
    than ``TASKS_BACKFILL_MAX_RUNS`` fires is refused, nothing written.
    """
    if not task.is_recurring:
        raise ValidationError({"schedule_type": ["backfill needs an interval or cron schedule"]})
    for name, value in (("start", start), ("end", end)):
        if timezone.is_naive(value):
            raise ValidationError({name: ["must include a time-zone offset"]})
    if end <= start:
        raise ValidationError({"end": ["must be after start"]})
    limit = settings.TASKS_BACKFILL_MAX_RUNS
    anchor = task.next_run_at or task.created_at
    schedule = schedule_of(task, anchor=anchor)
    assert schedule is not None
    if isinstance(schedule, scheduling.IntervalSchedule):
        # Align on the schedule's own grid, however far back ``start`` lies.
        step = timedelta(seconds=schedule.seconds)
        back = (anchor - start) // step + 1 if start < anchor else 0
        schedule = scheduling.IntervalSchedule(
            seconds=schedule.seconds, anchor=anchor - back * step
        )
    fires = scheduling.fires_between(schedule, start, end, limit=limit + 1)
    if len(fires) > limit:
        raise ValidationError(
            {
                "end": [
                    f"the range holds more than {limit} fires (TASKS_BACKFILL_MAX_RUNS); narrow it"
                ]
            }
        )
    now = timezone.now()
    runs = [new_run(task, trigger=Trigger.BACKFILL, due_at=now, scheduled_for=f) for f in fires]
    with transaction.atomic():
        existing = set(
            Run.objects.filter(
                task=task, scheduled_for__in=fires, trigger__in=[Trigger.SCHEDULE, Trigger.BACKFILL]
            ).values_list("scheduled_for", flat=True)
        )
        runs = [r for r in runs if r.scheduled_for not in existing]
        Run.objects.bulk_create(runs)
        audit(
            task.id,
            "backfilled",
            by=by,
            note=f"{len(runs)} runs for {start.isoformat()} .. {end.isoformat()}",
        )
        ids = [r.id for r in runs]
        transaction.on_commit(lambda: dispatch.publish_runs(ids))
    return runs


def task_execute(*, task: Task, trigger: str = Trigger.MANUAL) -> Run:
    """Run the task now, with its own queue, priority, timeout and retry settings."""
    now = timezone.now()
    return run_create(task=task, trigger=trigger, due_at=now, now=now)


def task_schedule_once(
    *,
    task: Task,
    delay_seconds: float | None = None,
    run_at: datetime | None = None,
    expires_in_seconds: float | None = None,
    expires_at: datetime | None = None,
) -> Run:
    """One run after ``delay_seconds`` or at ``run_at`` (exactly one of them)."""
    now = timezone.now()
    if (delay_seconds is None) == (run_at is None):
        raise ValidationError({"delay_seconds": ["give exactly one of delay_seconds or run_at"]})
    if delay_seconds is not None:
        due_at = now + validation.check_delay(delay_seconds)
        trigger = Trigger.DELAY
    else:
        assert run_at is not None
        due_at = validation.check_run_at(run_at, now=now)
        trigger = Trigger.AT
    deadline = validation.check_expiry(
        expires_in_seconds=expires_in_seconds, expires_at=expires_at, due_at=due_at
    )
    return run_create(task=task, trigger=trigger, due_at=due_at, now=now, expires_at=deadline)


def _generate_task_id(action: str) -> str:
    return f"{action}-{secrets.token_hex(4)}"


def _idle_status(task: Task) -> str:
    if task.is_recurring or task.runs.filter(status__in=ACTIVE_RUN_STATUSES).exists():
        return TaskStatus.PENDING
    last = task.runs.order_by("-created_at").values_list("status", flat=True).first()
    after_run: dict[str | None, str] = {
        RunStatus.COMPLETED: TaskStatus.COMPLETED,
        RunStatus.FAILED: TaskStatus.FAILED,
        RunStatus.CANCELLED: TaskStatus.CANCELLED,
    }
    return after_run.get(last, TaskStatus.CREATED)


def _sync_schedule(task: Task, *, now: datetime, replan: bool) -> None:
    """Bring ``next_run_at``, the beat entry and a 'once' task's run in line with the task."""
    if task.is_recurring:
        if replan or task.next_run_at is None:
            task.next_run_at = first_fire(task, now=now)
        if task.status == TaskStatus.CREATED and not task.paused:
            task.status = TaskStatus.PENDING
        task.save(update_fields=["next_run_at", "status"])
    elif task.schedule_type == ScheduleType.ONCE and replan:
        _sync_once_run(task, now=now)
    elif replan:
        Task.objects.filter(pk=task.pk).update(next_run_at=next_run_at_expr())
        task.refresh_from_db(fields=["next_run_at", "status"])
    _sync_periodic_task(task)


def _sync_once_run(task: Task, *, now: datetime) -> None:
    """A 'once' task owns one run at ``run_at``: move it while it waits, or create it."""
    assert task.run_at is not None
    waiting = task.runs.filter(trigger=Trigger.AT, status=RunStatus.PENDING).first()
    if waiting is not None:
        expires_at = (
            task.run_at + timedelta(seconds=task.expires_after_seconds)
            if task.expires_after_seconds
            else None
        )
        Run.objects.filter(pk=waiting.pk, status=RunStatus.PENDING).update(
            due_at=task.run_at, scheduled_for=task.run_at, expires_at=expires_at
        )
        Task.objects.filter(pk=task.pk).update(next_run_at=next_run_at_expr())
        dispatch.enqueue_on_commit(Run.objects.select_related("task").get(pk=waiting.pk), now=now)
    else:
        run_create(task=task, trigger=Trigger.AT, due_at=task.run_at, now=now)
    task.refresh_from_db(fields=["next_run_at", "status"])


def _sync_periodic_task(task: Task) -> None:
    """The django-celery-beat entry a recurring task owns; only this function writes it."""
    if not task.is_recurring:
        if task.periodic_task_id:
            periodic = task.periodic_task
            Task.objects.filter(pk=task.pk).update(periodic_task=None)
            task.periodic_task = None
            if periodic is not None:
                periodic.delete()
        return
    interval = crontab = None
    if task.schedule_type == ScheduleType.INTERVAL:
        interval, _ = IntervalSchedule.objects.get_or_create(
            every=task.interval_seconds, period=IntervalSchedule.SECONDS
        )
    else:
        fields = scheduling.parse_cron(task.cron)
        minute, hour, dom, month, dow = scheduling.expand_macro(fields.text).split()
        crontab, _ = CrontabSchedule.objects.get_or_create(
            minute=minute,
            hour=hour,
            day_of_month=dom,
            month_of_year=month,
            day_of_week=dow,
            timezone=task.timezone,
        )
    values = {
        "name": f"task:{task.id}",
        "task": EXECUTE_TASK,
        "kwargs": json.dumps({"task_id": task.id}),
        "interval": interval,
        "crontab": crontab,
        "enabled": not task.paused,
        "queue": task.queue,
        "priority": task.priority,
        "description": f"Owned by task {task.id}; edit the task, not this entry.",
    }
    periodic = task.periodic_task
    if periodic is None:
        periodic = PeriodicTask.objects.create(**values)
        task.periodic_task = periodic
        Task.objects.filter(pk=task.pk).update(periodic_task=periodic)
    else:
        for name, value in values.items():
            setattr(periodic, name, value)
        periodic.save()


def task_create_with_run(
    *,
    id: str | None,
    by: str,
    fields: dict[str, Any],
    delay_seconds: float | None = None,
    run_at: datetime | None = None,
    expires_in_seconds: float | None = None,
    expires_at: datetime | None = None,
) -> tuple[Task, Run | None]:
    """Create a task and, when a delay or an instant is given, its one run — together.

    One transaction: a bad delay rolls the new task back, so a reminder made in one request
    is written whole or not at all.
    """
    one_off = any(v is not None for v in (delay_seconds, run_at, expires_in_seconds, expires_at))
    with transaction.atomic():
        task = task_create(id=id, by=by, **fields)
        run = None
        if one_off:
            run = task_schedule_once(
                task=task,
                delay_seconds=delay_seconds,
                run_at=run_at,
                expires_in_seconds=expires_in_seconds,
                expires_at=expires_at,
            )
    if run is not None:
        task.refresh_from_db()
    return task, run
