"""The writes of recovery: the worker's lease on its running runs, and beat's sweep over runs
that lost their deadline, their worker or their message (``tasks_app.worker.recovery`` and
``tasks_app.beat.sweep`` decide when; docs/reliability.md says what is guaranteed)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import transaction

from .. import store
from ..conf import app_settings
from ..messaging import dispatch
from ..models import Run, RunStatus, run_queue
from .run_lifecycle import run_fail, run_interrupt, runs_expire
from .time_limits import run_timeout_seconds, timed_out_error

log = logging.getLogger(__name__)


def run_renew_leases(*, held: dict[str, datetime], now: datetime) -> list[str]:
    """Push the lease (``heartbeat_at``) of the runs a process holds (run id → when it
    started holding it), while they are still running. Returns the ids of those that may be
    lost: claimed while held, then ended by the sweep — interrupted (the lease was stale: the
    process stood still past ``TASKS_STALL_SECONDS``, SIGSTOP, a frozen VM, a database it
    could not reach), or failed or retried (past the time limit): the run's next attempt may
    be another worker's now, and its outcome is recorded.

    A run ``completed`` was completed by its holder; one not started while held was never
    claimed by it (a duplicate message) or is a redelivery of a run ended before the hold
    began. The holder itself may have just failed its run: the caller tells those apart
    from losses (``worker.recovery``: the holder says so before recording its outcome).
    """
    if not held:
        return []
    ids = list(held)
    renewed = store.renew_leases(run_ids=ids, now=now)
    if renewed == len(ids):
        return []
    ended = (RunStatus.INTERRUPTED, RunStatus.FAILED, RunStatus.RETRYING, RunStatus.CANCELLED)
    return [
        str(run_id)
        for run_id, started in Run.objects.filter(id__in=ids, status__in=ended).values_list(
            "id", "started_at"
        )
        if started is not None and started >= held[str(run_id)]
    ]


def run_cancel_requests(*, run_ids: Iterable[str]) -> dict[str, datetime]:
    """Of ``run_ids`` (the runs a process holds), those a person asked to stop while they
    run, with when they were asked (``services.run_cancel``)."""
    ids = list(run_ids)
    if not ids:
        return {}
    return store.cancel_requests(run_ids=ids)


def run_stop_cancelled(*, run_id: str, reason: str) -> Run | None:
    """Record the end of a running run asked to stop whose action did not stop within the
    grace, right before its process is ended: ``cancelled`` (``finish_run``, which writes
    ``cancelled`` for any end of a run with a cancel request), no new attempt. ``None`` if
    it is not running any more."""
    run = Run.objects.select_related("task").filter(pk=run_id, status=RunStatus.RUNNING).first()
    if run is None:
        return None
    return run_fail(run=run, error=reason, retryable=False)


def run_expire_overdue(*, now: datetime, batch: int = 1000) -> int:
    """``pending``/``queued`` runs past their deadline (``expires_at``) become ``expired``.

    This is what expires a run when no worker is up to notice at claim time; rows are taken
    with ``SKIP LOCKED`` so a run being published or claimed right now is left alone (the
    claim checks the deadline itself).
    """
    total = 0
    while True:
        with transaction.atomic():
            ids = list(
                Run.objects.select_for_update(skip_locked=True)
                .filter(status__in=[RunStatus.PENDING, RunStatus.QUEUED], expires_at__lt=now)
                .values_list("id", flat=True)[:batch]
            )
            if not ids:
                return total
            runs_expire(ids, now=now)
        total += len(ids)
        if len(ids) < batch:
            return total


def run_fail_stalled(*, now: datetime, batch: int = 500) -> list[Run]:
    """Running runs whose worker is gone: interrupted (a new attempt, not counted against
    ``max_retries``: :func:`run_interrupt`), or, past their time limit, retried or failed by
    their task's policy.

    A run is stalled when its lease (``heartbeat_at``, renewed every
    ``TASKS_HEARTBEAT_SECONDS`` by the executing process) is older than
    ``TASKS_STALL_SECONDS``: its worker was killed, lost its database, or hangs without
    the GIL. This is the backstop: a worker whose broker connection died has its runs
    interrupted within seconds, when the broker redelivers their messages
    (``run_lifecycle._recover_if_orphaned``). A run still renewing its lease but running
    longer than its hard time limit plus the stall window fails (a pool that cannot enforce
    time limits).
    """
    stall = timedelta(seconds=app_settings.STALL_SECONDS)
    grace = timedelta(seconds=dispatch.HARD_LIMIT_GRACE_SECONDS)
    candidates = (
        Run.objects.select_related("task")
        .filter(status=RunStatus.RUNNING, started_at__lt=now - stall)
        .order_by("started_at")[:batch]
    )
    failed: list[Run] = []
    for run in candidates:
        assert run.started_at is not None
        lease = run.heartbeat_at or run.started_at
        limit = timedelta(seconds=run_timeout_seconds(run.task))
        elapsed = now - run.started_at
        worker = run.worker or "its worker"
        if now - lease > stall and elapsed <= limit:
            silent = int((now - lease).total_seconds())
            reason = f"worker lost: {worker} stopped renewing the run's lease {silent} s ago"
            log.warning("run %s stalled: %s", run.id, reason)
            failed.append(run_interrupt(run=run, reason=reason))
            continue
        if now - lease > stall:
            silent = int((now - lease).total_seconds())
            error = timed_out_error(run.task, f"{worker} lost; no lease renewal for {silent} s")
        elif elapsed > limit + grace + stall:
            error = timed_out_error(
                run.task, f"still running after {int(elapsed.total_seconds())} s"
            )
        else:
            continue
        log.warning("run %s stalled: %s", run.id, error)
        failed.append(run_fail(run=run, error=error, retryable=True))
    return failed


def run_requeue_lost(*, now: datetime, queues: Iterable[str]) -> int:
    """Runs ``queued`` longer than ``TASKS_REQUEUE_AFTER_SECONDS`` past their due time, in
    ``queues`` (those the caller found holding no ready message), go back to ``pending`` so
    the next release publishes them again under the same run id. Should the original
    message turn up after all, the claim lets only one of the two start the run.
    """
    cutoff = now - timedelta(seconds=app_settings.REQUEUE_AFTER_SECONDS)
    lost = list(
        Run.objects.alias(on_queue=run_queue())
        .filter(
            status=RunStatus.QUEUED,
            queued_at__lt=cutoff,
            due_at__lt=cutoff,
            on_queue__in=list(queues),
        )
        .values_list("id", flat=True)
    )
    # queued -> pending is one statement wherever it happens; conditional on queued, so a
    # run claimed since it was read stays claimed.
    return store.unqueue_runs(run_ids=lost) if lost else 0
