"""Beat's sweep's writes over runs that lost their deadline, their worker or their message
(``tasks_app.beat.sweep`` decides when; docs/reliability.md says what is guaranteed)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import transaction

from .. import store
from ..conf import app_settings
from ..messaging import dispatch
from ..models import Run, RunStatus, run_queue
from ..services.run_lifecycle import run_fail, run_interrupt, runs_expire
from ..services.time_limits import run_timeout_seconds, timed_out_error

log = logging.getLogger(__name__)


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
