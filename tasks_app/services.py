"""Every write: tasks, schedules and runs. The only place that moves a status.

Entry points (admin, API, management commands, Celery tasks, the beat scheduler) call
these functions and hold no rules of their own. Status changes are conditional updates
(``UPDATE ... WHERE status = <expected>``), so a duplicated message or a second process
racing for the same row changes nothing.
"""

from __future__ import annotations

import json
import logging
import random
import traceback
from datetime import datetime, timedelta
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Case, F, Min, OuterRef, Q, Subquery, Value, When
from django.utils import timezone
from django_celery_beat.models import (
    CrontabSchedule,
    IntervalSchedule,
    PeriodicTask,
)

from . import actions, dispatch, scheduling, validation
from .models import (
    ACTIVE_RUN_STATUSES,
    RECURRING,
    Run,
    RunStatus,
    ScheduleType,
    Task,
    TaskStatus,
    Trigger,
    lateness_ms,
)

log = logging.getLogger(__name__)

EXECUTE_TASK = "tasks_app.execute_task"
SCHEDULE_FIELDS = ("schedule_type", "run_at", "interval_seconds", "cron", "timezone")
TASK_FIELDS = (
    "name",
    "description",
    "action",
    "payload",
    "queue",
    "priority",
    "max_retries",
    "retry_backoff_seconds",
    "timeout_seconds",
    "expires_after_seconds",
    *SCHEDULE_FIELDS,
)
MAX_RETRY_DELAY_SECONDS = 3600


class ConflictError(Exception):
    """The request is valid but conflicts with the current state (HTTP 409)."""


# --- Tasks ------------------------------------------------------------------------------


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
    return task_save(task=task, by=by)


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
    log.info("task %s %s by %s", task.id, "created" if adding else "updated", by or "-")
    return task


def task_delete(*, task: Task) -> None:
    """Delete the task, its beat entry and its runs (run history goes with the task)."""
    with transaction.atomic():
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
        task.save(update_fields=["paused", "pause_note", "paused_at", "paused_by", "status", "updated_at"])
        _sync_periodic_task(task)
    return task


def task_resume(*, task: Task, by: str = "") -> Task:
    """Resume fires from now on (fires missed while paused are not replayed)."""
    now = timezone.now()
    with transaction.atomic():
        task.paused = False
        task.pause_note = ""
        task.paused_at = None
        task.paused_by = ""
        task.status = _idle_status(task)
        task.save(update_fields=["paused", "pause_note", "paused_at", "paused_by", "status", "updated_at"])
        _sync_schedule(task, now=now, replan=True)
    transaction.on_commit(dispatch.release_due_runs)
    return task


# --- Runs that people ask for ------------------------------------------------------------


def task_execute(*, task: Task, trigger: str = Trigger.MANUAL) -> Run:
    """Run the task now, with its own queue, priority, timeout and retry settings."""
    now = timezone.now()
    return _run_create(task=task, trigger=trigger, due_at=now, now=now)


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
    return _run_create(task=task, trigger=trigger, due_at=due_at, now=now, expires_at=deadline)


def run_cancel(*, run: Run) -> Run:
    """Cancel a run that has not started (``pending`` or ``queued``)."""
    now = timezone.now()
    changed = Run.objects.filter(
        pk=run.pk, status__in=[RunStatus.PENDING, RunStatus.QUEUED]
    ).update(status=RunStatus.CANCELLED, finished_at=now)
    run.refresh_from_db()
    if not changed:
        raise ConflictError(f"run {run.id} is {run.status}; only pending or queued runs can be cancelled")
    _task_after_run(run.task_id, TaskStatus.CANCELLED)
    return run


def run_retry(*, run: Run) -> Run:
    """A new attempt of a finished, unsuccessful run (``failed``, ``expired``, ``cancelled``)."""
    if run.status not in (RunStatus.FAILED, RunStatus.EXPIRED, RunStatus.CANCELLED):
        raise ConflictError(f"run {run.id} is {run.status}; only failed, expired or cancelled runs can be retried")
    now = timezone.now()
    return _run_create(
        task=run.task,
        trigger=Trigger.RETRY,
        due_at=now,
        now=now,
        scheduled_for=run.scheduled_for,
        attempt=_last_attempt(run) + 1,
        first_attempt_id=run.first_attempt_id or run.id,
    )


# --- Execution (called by the worker) ----------------------------------------------------


def run_execute(*, run_id: str, worker: str) -> Run | None:
    """Claim the run, call its action, record the outcome. ``None`` if not claimable.

    The claim is ``UPDATE ... WHERE status = 'queued'``: a redelivered or duplicated message
    for a run that already started, finished or was cancelled does nothing.
    """
    run = run_claim(run_id=run_id, worker=worker)
    if run is None:
        return None
    task = run.task
    ctx = actions.RunContext(
        run_id=str(run.id),
        task_id=task.id,
        attempt=run.attempt,
        scheduled_for=run.scheduled_for,
        due_at=run.due_at,
        timeout_seconds=task.timeout_seconds,
    )
    try:
        action = actions.get(task.action)
        outcome = action.func(dict(task.payload), ctx)
    except SoftTimeLimitExceeded:
        limit = task.timeout_seconds or settings.TASKS_DEFAULT_TIMEOUT_SECONDS
        return run_fail(run=run, error=f"timed out after {limit} s", retryable=True)
    except Exception as exc:  # the action's failure is the run's failure, never the worker's
        retryable = not isinstance(exc, actions.ActionError) or exc.retryable
        return run_fail(
            run=run,
            error=f"{type(exc).__name__}: {exc}\n\n{traceback.format_exc()}",
            retryable=retryable,
        )
    if isinstance(outcome, actions.Outcome):
        return run_complete(run=run, output=outcome.output, result=outcome.result)
    return run_complete(run=run, output="" if outcome is None else str(outcome))


def run_claim(*, run_id: str, worker: str) -> Run | None:
    """``queued → running`` (or ``queued → expired`` past the run's deadline)."""
    run = Run.objects.select_related("task").filter(pk=run_id).first()
    if run is None or run.status != RunStatus.QUEUED:
        log.info("run %s is %s; message ignored", run_id, run.status if run else "gone")
        return None
    now = timezone.now()
    deadline = _deadline(run)
    if deadline is not None and now > deadline:
        Run.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(
            status=RunStatus.EXPIRED,
            finished_at=now,
            error=f"expired: could not start by {deadline.isoformat()}",
        )
        _task_after_run(run.task_id, TaskStatus.FAILED)
        return None
    late = lateness_ms(now, run.due_at)
    claimed = Run.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(
        status=RunStatus.RUNNING, started_at=now, worker=worker, lateness_ms=late
    )
    if not claimed:
        return None
    run.status, run.started_at, run.worker, run.lateness_ms = RunStatus.RUNNING, now, worker, late
    Task.objects.filter(pk=run.task_id, paused=False).update(
        status=TaskStatus.RUNNING, next_run_at=_next_run_at_expr()
    )
    return run


def run_complete(*, run: Run, output: str = "", result: Any = None) -> Run:
    text, truncated = cap_output(output)
    _run_finish(run, RunStatus.COMPLETED, output=text, truncated=truncated, result=_jsonable(result))
    _task_after_run(run.task_id, TaskStatus.COMPLETED)
    return run


def run_fail(*, run: Run, error: str, retryable: bool = True) -> Run:
    """Record a failure; schedule the next attempt while retries remain."""
    task = run.task
    retry = retryable and run.attempt <= task.max_retries
    status = RunStatus.RETRYING if retry else RunStatus.FAILED
    text, _ = cap_output(error)
    with transaction.atomic():
        _run_finish(run, status, error=text)
        if retry:
            now = timezone.now()
            _run_create(
                task=task,
                trigger=Trigger.RETRY,
                due_at=now + retry_delay(task, attempt=run.attempt),
                now=now,
                scheduled_for=run.scheduled_for,
                attempt=run.attempt + 1,
                first_attempt_id=run.first_attempt_id or run.id,
                expires_at=run.expires_at,
            )
        else:
            _task_after_run(run.task_id, TaskStatus.FAILED)
    return run


def retry_delay(task: Task, *, attempt: int) -> timedelta:
    """Exponential backoff from ``retry_backoff_seconds``, capped, with full jitter on half."""
    base = task.retry_backoff_seconds * (2 ** (attempt - 1))
    capped = min(base, MAX_RETRY_DELAY_SECONDS)
    return timedelta(seconds=capped / 2 + random.uniform(0, capped / 2))  # noqa: S311


def cap_output(text: str) -> tuple[str, bool]:
    """At most ``TASKS_OUTPUT_LIMIT_BYTES`` of UTF-8, and whether anything was cut."""
    limit = settings.TASKS_OUTPUT_LIMIT_BYTES
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text, False
    return data[:limit].decode("utf-8", errors="ignore"), True


# --- Recurring schedules (called by beat) ------------------------------------------------


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
                runs.append(_new_run(task, trigger=Trigger.SCHEDULE, due_at=fire, scheduled_for=fire))
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


# --- Internals --------------------------------------------------------------------------


def _generate_task_id(action: str) -> str:
    import secrets

    return f"{action}-{secrets.token_hex(4)}"


def _new_run(
    task: Task,
    *,
    trigger: str,
    due_at: datetime,
    scheduled_for: datetime | None = None,
    attempt: int = 1,
    first_attempt_id: Any = None,
    expires_at: datetime | None = None,
) -> Run:
    if expires_at is None and task.expires_after_seconds:
        expires_at = due_at + timedelta(seconds=task.expires_after_seconds)
    return Run(
        task=task,
        trigger=trigger,
        status=RunStatus.PENDING,
        due_at=due_at,
        scheduled_for=scheduled_for or due_at,
        attempt=attempt,
        first_attempt_id=first_attempt_id,
        expires_at=expires_at,
    )


def _run_create(*, task: Task, trigger: str, due_at: datetime, now: datetime, **extra: Any) -> Run:
    with transaction.atomic():
        run = _new_run(task, trigger=trigger, due_at=due_at, **extra)
        run.save(force_insert=True)
        Task.objects.filter(pk=task.pk, paused=False).exclude(status=TaskStatus.RUNNING).update(
            status=TaskStatus.PENDING
        )
        Task.objects.filter(pk=task.pk).update(next_run_at=_next_run_at_expr())
        dispatch.enqueue_on_commit(run, now=now)
    return run


def _run_finish(run: Run, status: str, **fields: Any) -> None:
    now = timezone.now()
    Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
        status=status, finished_at=now, **fields
    )
    run.status, run.finished_at = status, now
    for name, value in fields.items():
        setattr(run, name, value)


def _task_after_run(task_id: str, status: str) -> None:
    """Keep the task's status in step with its latest run; recurring tasks go back to
    ``pending`` (they will fire again)."""
    Task.objects.filter(pk=task_id, paused=False).update(
        status=Case(
            When(schedule_type__in=RECURRING, then=Value(TaskStatus.PENDING)),
            default=Value(status),
        ),
        next_run_at=_next_run_at_expr(),
    )


def _next_run_at_expr() -> Any:
    """Recurring tasks keep their planned fire; others show their earliest waiting run."""
    earliest = (
        Run.objects.filter(task=OuterRef("pk"), status__in=[RunStatus.PENDING, RunStatus.QUEUED])
        .values("task")
        .annotate(first=Min("due_at"))
        .values("first")
    )
    return Case(
        When(schedule_type__in=RECURRING, then=F("next_run_at")),
        default=Subquery(earliest),
    )


def _idle_status(task: Task) -> str:
    if task.is_recurring or task.runs.filter(status__in=ACTIVE_RUN_STATUSES).exists():
        return TaskStatus.PENDING
    last = task.runs.order_by("-created_at").values_list("status", flat=True).first()
    return {
        RunStatus.COMPLETED: TaskStatus.COMPLETED,
        RunStatus.FAILED: TaskStatus.FAILED,
        RunStatus.CANCELLED: TaskStatus.CANCELLED,
    }.get(last, TaskStatus.CREATED)  # type: ignore[arg-type]


def _deadline(run: Run) -> datetime | None:
    return run.expires_at


def _last_attempt(run: Run) -> int:
    first = run.first_attempt_id or run.id
    latest = (
        Run.objects.filter(Q(pk=first) | Q(first_attempt_id=first))
        .order_by("-attempt")
        .values_list("attempt", flat=True)
        .first()
    )
    return latest or run.attempt


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


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
        Task.objects.filter(pk=task.pk).update(next_run_at=_next_run_at_expr())
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
        Task.objects.filter(pk=task.pk).update(next_run_at=_next_run_at_expr())
        dispatch.enqueue_on_commit(Run.objects.select_related("task").get(pk=waiting.pk), now=now)
    else:
        _run_create(task=task, trigger=Trigger.AT, due_at=task.run_at, now=now)
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
