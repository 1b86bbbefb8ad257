"""A run's end that more than one way in writes: failed, interrupted, lost, cancelled, expired
(a worker's claim, execution and completion: ``tasks_app.worker.run_execution``).

Every status change is a conditional statement (``UPDATE ... WHERE status = <expected>``,
named in ``tasks_app/store/queries.sql``): whoever gets there first (a worker finishing, the
sweep declaring the run lost, a duplicate message) wins and the others change nothing, so a
run's state moves at most once along each edge even though its message may be delivered
more than once. See docs/reliability.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db import InterfaceError, OperationalError, transaction

from .. import store
from ..conf import app_settings
from ..models import (
    Run,
    RunStatus,
    Task,
    Trigger,
)
from ..runtime import clock
from ..runtime.run_logs import run_log
from ..selectors import paused_filter
from ..timing.policies import retry_after
from ..vocabulary import validation
from ..vocabulary.choices import REQUESTED_BY_RETRY
from . import permissions
from .errors import ConflictError
from .run_create import run_create, same_call
from .task_operations import task_pause

log = logging.getLogger(__name__)
# The database is unreachable (restart, failover, network): worth waiting for, not a failure.
DB_ERRORS = (OperationalError, InterfaceError)
# How long a redelivered message for a running run waits for the run's executor lock before
# concluding that the executor is alive (the backend of a process killed a moment ago may
# take a few milliseconds to notice and drop the lock).
EXECUTOR_LOCK_WAIT_SECONDS = 2.0


def _recover_if_orphaned(run: Run) -> None:
    """A message for a ``running`` run: the broker redelivered it, because the connection
    of the worker that took it closed. Either that worker died with the run (kill -9, OOM,
    lost node, deploy past its grace) — then the run is interrupted and runs again at once,
    seconds after the death instead of a stall window later — or only its broker
    connection blinked and the executor is still at work: then the message is ignored.

    The executor's session holds the run's executor lock from its claim to its completion
    (``claim_run``), and Postgres drops it when that session's connection dies. The lock is
    awaited for up to ``EXECUTOR_LOCK_WAIT_SECONDS``: the backend of a process killed a
    moment ago may not have noticed yet. Once taken (until this transaction ends), the
    executor cannot be recording an outcome, and :func:`run_interrupt` is conditional on
    ``running`` in case it recorded one just before.
    """
    deadline = time.monotonic() + EXECUTOR_LOCK_WAIT_SECONDS
    with transaction.atomic():
        while not (gone := _executor_gone(run)):
            if gone is None or time.monotonic() > deadline:
                log.info(
                    "run %s is running on %s (its executor is alive); redelivered message ignored",
                    run.pk,
                    run.worker or "another worker",
                )
                return
            time.sleep(0.05)
        who = run.worker or "its worker"
        run_interrupt(run=run, reason=f"worker lost: {who} died while running it")


def _executor_gone(run: Run) -> bool | None:
    """Whether the run's executor lock is free (then held until the transaction ends);
    ``None`` if this process's own session holds it (it is the executor)."""
    return store.executor_gone(run_id=run.pk)


def run_fail(*, run: Run, error: str, retryable: bool = True, executor: bool = False) -> Run:
    """Record a failure; schedule the next attempt while retries remain.

    Attempt ``n`` is retried while ``n - interruptions <= max_retries`` (so
    ``max_retries=3`` makes up to 4 attempts, not counting those cut off by their worker's
    death); each retry is a new run row (``trigger=retry``, ``attempt=n+1``, linked to
    the first attempt) due after ``timing.policies.retry_after``. The finish is conditional on the run
    still being ``running``, and the next attempt is created in the same transaction only
    if it was, so two processes failing the same run make one retry, not two. ``executor``:
    the caller is the process that claimed the run, and releases its executor lock.
    """
    task = run.task
    delay = None
    if retryable:
        delay = retry_after(
            attempt=run.attempt,
            interruptions=run.interruptions,
            max_retries=task.max_retries,
            backoff_seconds=task.retry_backoff_seconds,
        )
    return _finish(run, error=error, executor=executor, retry_after=delay)


def run_interrupt(*, run: Run, reason: str) -> Run:
    """A ``running`` run cut off by its worker's death (kill, OOM, lost node, a deploy past
    its grace): ``interrupted``, and a new attempt due now that does not count against
    ``max_retries`` (``interruptions`` one higher). The ``TASKS_MAX_INTERRUPTIONS + 1``-th
    interruption fails it instead ("interrupted N times"): a run that kills every worker
    running it (a poison pill) stops. Conditional on ``running``, like :func:`run_fail`.
    """
    count, limit = run.interruptions + 1, app_settings.MAX_INTERRUPTIONS
    if count > limit:
        error = f"interrupted {count} times (TASKS_MAX_INTERRUPTIONS is {limit}); last: {reason}"
        return _finish(run, error=error, executor=False, retry_after=None)
    error = f"interrupted ({count} of at most {limit}): {reason}"
    return _finish(run, error=error, executor=False, retry_after=timedelta(0), interrupted=True)


def _finish(
    run: Run,
    *,
    error: str,
    executor: bool,
    retry_after: timedelta | None,
    interrupted: bool = False,
) -> Run:
    """``running →`` ``interrupted`` / ``retrying`` with the next attempt due after
    ``retry_after``, or ``failed`` (counted in the task's failure streak) without one."""
    task = run.task
    if interrupted:
        status = RunStatus.INTERRUPTED
    else:
        status = RunStatus.RETRYING if retry_after is not None else RunStatus.FAILED
    text, _ = cap_output(error)
    now = clock.now()
    with transaction.atomic():
        finished = store.finish_run(
            run_id=run.pk, status=status, now=now, error=text, executor=executor
        )
        if finished is None:
            _not_recorded(run, status)
            return run
        run.status, run.finished_at, run.error = RunStatus(finished.status), now, text
        if run.status == RunStatus.CANCELLED:  # a person asked it to stop: no new attempt
            task_after_run([run.task_id], RunStatus.CANCELLED)
        elif retry_after is not None:
            run_create(
                task=task,
                trigger=Trigger.RETRY,
                due_at=now + retry_after,
                now=now,
                scheduled_for=run.scheduled_for,
                attempt=run.attempt + 1,
                first_attempt_id=run.first_attempt_id or run.id,
                expires_at=run.expires_at,
                interruptions=run.interruptions + (1 if interrupted else 0),
                requested_by=f"{REQUESTED_BY_RETRY}{run.id}",
                **same_call(run),
            )
        else:
            task_after_run([run.task_id], RunStatus.FAILED)
            _count_failure(task, error=text)
    if run.status == RunStatus.CANCELLED:
        _cancelled(run, how=text.splitlines()[0] if text else status)
        return run
    run_log(log, run).warning("run %s: %s", status, text.splitlines()[0] if text else "")
    return run


def run_lost(*, run_id: str, error: str, executor: bool = False) -> Run | None:
    """The process executing a ``running`` run hit its time limit (killed at the hard limit,
    or the soft limit struck outside the action): record ``error`` and retry or fail it by
    the task's retry policy — a time limit is the task's failure, not an interruption.

    ``None`` if the run is not running any more (its outcome was already recorded).
    """
    run = (
        Run.objects.select_related("task")
        .filter(pk=run_id, status__still=RunStatus.RUNNING)
        .first()
    )
    if run is None:
        return None
    return run_fail(run=run, error=error, retryable=True, executor=executor)


def run_cancel(*, run: Run, by: permissions.Actor = "") -> Run:
    """Cancel a run: one that has not started (``pending`` or ``queued``) is ``cancelled`` at
    once; a ``running`` one is asked to stop (``cancel_requested_at``, kept from a first
    request) and stays ``running`` until it does. Its action sees the request
    (``ctx.cancel_requested()``, ``tasks_app.actions.cancel_requested()``) within
    ``TASKS_CANCEL_CHECK_SECONDS``; its worker ends it ``TASKS_CANCEL_GRACE_SECONDS`` after
    the request if it has not stopped (``tasks_app.worker.recovery``). However it ends, it
    ends ``cancelled``, written once by the store, and is not retried. A finished run is
    refused (409)."""
    name = permissions.authorize(by, "cancel")
    now = clock.now()
    if store.cancel_run(run_id=run.pk, now=now) is not None:
        run.refresh_from_db()
        task_after_run([run.task_id], RunStatus.CANCELLED)
        run_log(log, run).info("run %s cancelled by %s", run.id, name or "-", extra={"by": name})
        return run
    asked = store.request_cancel(run_id=run.pk, now=now)
    run.refresh_from_db()
    if asked is None:
        raise ConflictError(
            f"run {run.id} is {run.status}; only pending, queued or running runs can be cancelled"
        )
    if asked == now:
        run_log(log, run).info(
            "run %s asked to stop by %s", run.id, name or "-", extra={"by": name}
        )
    return run


def runs_expire(run_ids: list[Any], *, now: datetime) -> int:
    """Those of ``run_ids`` still waiting past their deadline become ``expired``."""
    task_ids = store.expire_runs(run_ids=run_ids, now=now)
    task_after_run(set(task_ids), RunStatus.EXPIRED)
    return len(task_ids)


def task_after_run(task_ids: Iterable[str], run_status: str) -> None:
    """Keep each task's status in step with its latest run, which ended ``run_status``
    (``task_after_run``, by the one task-status rule of tasks_app/store/schema.sql):
    recurring tasks go back to ``pending`` while they will fire again (a finished schedule —
    ``max_runs`` reached, ``end_at`` passed — ends with its last run's status); an expired
    run leaves its task ``failed``."""
    store.task_after_run(task_ids=task_ids, run_status=run_status)


def cap_output(text: str) -> tuple[str, bool]:
    """At most ``TASKS_OUTPUT_LIMIT_BYTES`` of UTF-8, and whether anything was cut.

    NUL characters, which a Postgres text column cannot hold (a program printing
    ``/proc/*/environ`` or a binary file writes them), become U+FFFD, as undecodable bytes
    do; otherwise recording the outcome fails and the run stays ``running`` until the sweep.
    """
    text = text.replace("\x00", "\ufffd")
    limit = app_settings.OUTPUT_LIMIT_BYTES
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text, False
    return data[:limit].decode("utf-8", errors="ignore"), True


def _cancelled(run: Run, *, how: str) -> None:
    if log.isEnabledFor(logging.INFO):
        run_log(log, run).info("run cancelled: %s", how)


def _not_recorded(run: Run, status: str) -> None:
    log.warning("run %s was no longer running; its %s outcome is not recorded", run.pk, status)
    run.refresh_from_db()


def _count_failure(task: Task, *, error: str) -> None:
    """One more failure in a row; pause the task once ``pause_after_failures`` is reached."""
    streak = store.count_failure(task_id=task.pk)
    if not task.pause_after_failures or streak is None or streak < task.pause_after_failures:
        return
    current = Task.objects.filter(paused_filter(paused=False), pk=task.pk).first()
    if current is None:
        return
    reason = error.splitlines()[0] if error else "failed"
    note = f"auto-paused after {streak} consecutive failures; last: {reason}"
    task_pause(task=current, note=validation.fit_pause_note(note), by="system")
    log.error(
        "task %s auto-paused after %d consecutive failures",
        task.pk,
        streak,
        extra={"task_id": task.pk},
    )
