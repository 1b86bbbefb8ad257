"""Runs: creation, the worker-side lifecycle (claim, complete, fail, retry), cancel."""

from __future__ import annotations

import logging
import random
import traceback
from datetime import datetime, timedelta
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import Case, Q, Value, When
from django.utils import timezone

from .. import actions, dispatch
from ..models import (
    RECURRING,
    Run,
    RunStatus,
    Task,
    TaskStatus,
    Trigger,
    lateness_ms,
)
from .common import ConflictError, jsonable, next_run_at_expr

log = logging.getLogger(__name__)
MAX_RETRY_DELAY_SECONDS = 3600


def run_cancel(*, run: Run) -> Run:
    """Cancel a run that has not started (``pending`` or ``queued``)."""
    now = timezone.now()
    changed = Run.objects.filter(
        pk=run.pk, status__in=[RunStatus.PENDING, RunStatus.QUEUED]
    ).update(status=RunStatus.CANCELLED, finished_at=now)
    run.refresh_from_db()
    if not changed:
        raise ConflictError(f"run {run.id} is {run.status}; only pending or queued runs can be cancelled")
    task_after_run(run.task_id, TaskStatus.CANCELLED)
    return run


def run_retry(*, run: Run) -> Run:
    """A new attempt of a finished, unsuccessful run (``failed``, ``expired``, ``cancelled``)."""
    if run.status not in (RunStatus.FAILED, RunStatus.EXPIRED, RunStatus.CANCELLED):
        raise ConflictError(f"run {run.id} is {run.status}; only failed, expired or cancelled runs can be retried")
    now = timezone.now()
    return run_create(
        task=run.task,
        trigger=Trigger.RETRY,
        due_at=now,
        now=now,
        scheduled_for=run.scheduled_for,
        attempt=_last_attempt(run) + 1,
        first_attempt_id=run.first_attempt_id or run.id,
    )


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
        task_after_run(run.task_id, TaskStatus.FAILED)
        return None
    late = lateness_ms(now, run.due_at)
    claimed = Run.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(
        status=RunStatus.RUNNING, started_at=now, worker=worker, lateness_ms=late
    )
    if not claimed:
        return None
    run.status, run.started_at, run.worker, run.lateness_ms = RunStatus.RUNNING, now, worker, late
    Task.objects.filter(pk=run.task_id, paused=False).update(
        status=TaskStatus.RUNNING, next_run_at=next_run_at_expr()
    )
    return run


def run_complete(*, run: Run, output: str = "", result: Any = None) -> Run:
    text, truncated = cap_output(output)
    run_finish(run, RunStatus.COMPLETED, output=text, truncated=truncated, result=jsonable(result))
    task_after_run(run.task_id, TaskStatus.COMPLETED)
    return run


def run_fail(*, run: Run, error: str, retryable: bool = True) -> Run:
    """Record a failure; schedule the next attempt while retries remain."""
    task = run.task
    retry = retryable and run.attempt <= task.max_retries
    status = RunStatus.RETRYING if retry else RunStatus.FAILED
    text, _ = cap_output(error)
    with transaction.atomic():
        run_finish(run, status, error=text)
        if retry:
            now = timezone.now()
            run_create(
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
            task_after_run(run.task_id, TaskStatus.FAILED)
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


def new_run(
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


def run_create(*, task: Task, trigger: str, due_at: datetime, now: datetime, **extra: Any) -> Run:
    with transaction.atomic():
        run = new_run(task, trigger=trigger, due_at=due_at, **extra)
        run.save(force_insert=True)
        Task.objects.filter(pk=task.pk, paused=False).exclude(status=TaskStatus.RUNNING).update(
            status=TaskStatus.PENDING
        )
        Task.objects.filter(pk=task.pk).update(next_run_at=next_run_at_expr())
        dispatch.enqueue_on_commit(run, now=now)
    return run


def run_finish(run: Run, status: str, **fields: Any) -> None:
    now = timezone.now()
    Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
        status=status, finished_at=now, **fields
    )
    run.status, run.finished_at = status, now
    for name, value in fields.items():
        setattr(run, name, value)


def task_after_run(task_id: str, status: str) -> None:
    """Keep the task's status in step with its latest run; recurring tasks go back to
    ``pending`` (they will fire again)."""
    Task.objects.filter(pk=task_id, paused=False).update(
        status=Case(
            When(schedule_type__in=RECURRING, then=Value(TaskStatus.PENDING)),
            default=Value(status),
        ),
        next_run_at=next_run_at_expr(),
    )


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
