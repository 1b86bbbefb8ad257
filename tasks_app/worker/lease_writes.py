"""A worker's writes about the runs it holds: their lease renewed, the requests to stop them
read, a run asked to stop recorded (``tasks_app.worker.recovery`` decides when;
docs/reliability.md says what is guaranteed)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

from .. import store
from ..models import Run, RunStatus
from ..services.run_lifecycle import run_fail

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
