"""Beat's sweep over runs that lost their worker, their message or their deadline (every
tick, leader only, :func:`recover_runs`); the worker's side, the lease it keeps on the runs
it executes, is ``tasks_app.worker.recovery``. The guarantees are in docs/reliability.md.

1. ``pending``/``queued`` runs past their deadline become ``expired`` — also while no
   worker is up, so nothing starts late when workers come back;
2. ``running`` runs whose lease is older than ``TASKS_STALL_SECONDS`` (or that run past
   their hard limit plus that window) are retried or failed by their task's policy;
3. runs ``queued`` longer than ``TASKS_REQUEUE_AFTER_SECONDS`` past their due time, in a
   queue holding no ready message, lost their message: they go back to ``pending`` and the
   same tick's release publishes them again under the same run id.

The writes are service functions (``tasks_app.beat.sweep_writes``); this module decides
when.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from celery import current_app
from django.db import close_old_connections

from ..conf import app_settings
from ..messaging.queues import lane
from ..models import Run, RunStatus, run_queue
from ..runtime import clock
from .sweep_writes import run_expire_overdue, run_fail_stalled, run_requeue_lost

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recovered:
    expired: int = 0
    stalled: int = 0
    requeued: int = 0


class _Watch:
    """Since when this process has swept without interruption (monotonic clock): reset by a
    failed sweep and by a gap in the ticks (beat stood by, or was stuck on the database)."""

    since: float | None = None
    last: float = 0.0


def recover_runs(*, now: datetime | None = None) -> Recovered:
    """One sweep (beat calls this every tick, before releasing runs). Never raises: a
    database or broker outage is logged and the next tick tries again.

    Stalled runs are judged only once this process has watched the database for a whole
    stall window: after a database outage every lease looks old (no worker could renew it),
    and the workers get that window to renew them and record the runs they finished.
    """
    now = now or clock.now()
    mono = time.monotonic()
    if _Watch.since is None or mono - _Watch.last > 3 * app_settings.BEAT_TICK_SECONDS + 1:
        _Watch.since = mono
    _Watch.last = mono
    watched = mono - _Watch.since >= app_settings.STALL_SECONDS
    try:
        expired = run_expire_overdue(now=now)
        stalled = len(run_fail_stalled(now=now)) if watched else 0
        requeued = _requeue_lost(now=now)
    except Exception:
        log.exception("recovery sweep failed; retrying next tick")
        _Watch.since = None
        close_old_connections()
        return Recovered()
    if expired or stalled or requeued:
        log.warning("recovery: %d expired, %d stalled, %d re-published", expired, stalled, requeued)
    return Recovered(expired=expired, stalled=stalled, requeued=requeued)


def _requeue_lost(*, now: datetime) -> int:
    cutoff = now - timedelta(seconds=app_settings.REQUEUE_AFTER_SECONDS)
    queues = set(
        Run.objects.filter(status=RunStatus.QUEUED, queued_at__lt=cutoff, due_at__lt=cutoff)
        .values_list(run_queue(), flat=True)
        .distinct()
    )
    # A queue with ready messages (in it or its due lane) has a backlog, not a loss: its
    # runs wait their turn.
    idle = [
        queue
        for queue in sorted(queues)
        if ready_messages(queue) == 0 and ready_messages(lane(queue)) == 0
    ]
    return run_requeue_lost(now=now, queues=idle) if idle else 0


def ready_messages(queue: str) -> int | None:
    """Messages waiting in ``queue`` on the broker (0 if it does not exist); ``None`` if the
    broker cannot be asked."""
    try:
        with current_app.connection_for_read() as conn:
            conn.ensure_connection(max_retries=1)
            channel = conn.channel()
            try:
                return int(channel.queue_declare(queue=queue, passive=True).message_count)
            except conn.channel_errors:  # 404: the queue is gone, and its messages with it
                return 0
            finally:
                try:
                    channel.close()
                except Exception:  # already closed by the 404
                    log.debug("closing the channel failed", exc_info=True)
    except Exception:
        log.warning("cannot read the depth of queue %s", queue, exc_info=True)
        return None
