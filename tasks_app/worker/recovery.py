"""Recovery: the worker's lease on the runs it executes, and beat's sweep over runs that lost
their worker, their message or their deadline. The guarantees are in docs/reliability.md.

- **Lease** (worker side): while a run executes, one daemon thread per worker process
  renews its ``heartbeat_at`` every ``TASKS_HEARTBEAT_SECONDS``. The thread lives in the
  process that runs the action, so when that process dies (SIGKILL, OOM, the hard time
  limit, the whole machine) the renewals stop with it. A pool process that stood still past
  the stall window (SIGSTOP, a frozen VM) may have had its run handed to another worker: it
  kills itself rather than let its action run on beside the run's next attempt — at SIGCONT,
  before the action takes another step, or when its next renewal finds the run interrupted
  (the main process replaces it, as after any lost pool process).
- **Sweep** (beat side, every tick, :func:`recover_runs`):

  1. ``pending``/``queued`` runs past their deadline become ``expired`` — also while no
     worker is up, so nothing starts late when workers come back;
  2. ``running`` runs whose lease is older than ``TASKS_STALL_SECONDS`` (or that run past
     their hard limit plus that window) are retried or failed by their task's policy;
  3. runs ``queued`` longer than ``TASKS_REQUEUE_AFTER_SECONDS`` past their due time, in a
     queue holding no ready message, lost their message: they go back to ``pending`` and the
     same tick's release publishes them again under the same run id.

The writes are service functions (``tasks_app.services.run_recovery``); this module decides
when.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from billiard.process import current_process
from celery import current_app
from celery.signals import worker_process_init
from django.db import close_old_connections, connection
from django.utils import timezone

from ..conf import app_settings
from ..models import Run, RunStatus, run_queue
from ..services.run_recovery import (
    run_expire_overdue,
    run_fail_stalled,
    run_renew_leases,
    run_requeue_lost,
)

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Renews the lease of every run this process is executing, from one daemon thread.

    Started lazily in the process that executes runs (a prefork pool child, a thread-pool
    worker, a solo worker); a fork gets a fresh thread and an empty set.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, datetime] = {}  # run id -> when this process began holding it
        self._renewed_at = time.monotonic()  # the last renewal, or the first hold after it
        self._thread: threading.Thread | None = None
        self._pid = 0

    @contextmanager
    def hold(self, run_id: str) -> Iterator[None]:
        """Renew ``run_id``'s lease for as long as the block runs."""
        with self._lock:
            self._ensure_thread()
            if not self._runs:
                self._renewed_at = time.monotonic()
            self._runs[run_id] = timezone.now()
        try:
            yield
        finally:
            with self._lock:
                self._runs.pop(run_id, None)

    def _ensure_thread(self) -> None:
        if self._pid != os.getpid():
            self._pid, self._runs, self._thread = os.getpid(), {}, None
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name="run-lease", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while True:
            time.sleep(app_settings.HEARTBEAT_SECONDS)
            with self._lock:
                held = dict(self._runs)
            if not held:
                continue
            try:
                close_old_connections()  # this thread's own connection, health-checked
                started = time.monotonic()
                lost = run_renew_leases(held=held, now=timezone.now())
            except Exception:  # the database blinked: renew on the next beat
                log.warning("renewing the lease of %d runs failed", len(held), exc_info=True)
                connection.close()
                continue
            self._renewed_at = started
            if lost:
                lease_lost(lost, why="interrupted and handed to another worker")

    def stood_still(self) -> tuple[list[str], float]:
        """The runs held and how long ago their lease was last renewed (no lock: called from
        a signal handler, in the thread that may hold it)."""
        return list(self._runs), time.monotonic() - self._renewed_at


def lease_lost(run_ids: list[str], *, why: str) -> None:
    """This process's runs may be another worker's now: stop the actions here. A prefork
    pool process kills itself (the action cannot be stopped at an arbitrary point any other
    way; its main process replaces it and hands the message back, which the claim ignores or,
    if the run was not interrupted yet, recovers as an interruption). In a solo or threads
    pool the action runs in the worker's main process, which is not killed for one run: the
    action goes on, and what it returns is refused if the run is not running any more."""
    ids = ", ".join(run_ids)
    if current_process().name == "MainProcess":
        log.error("lease lost on run %s (%s); its action goes on", ids, why)
        return
    log.error("lease lost on run %s (%s); stopping this pool process", ids, why)
    os.kill(os.getpid(), signal.SIGKILL)


def _on_continue(_signum: int, _frame: object) -> None:
    """SIGCONT in a pool process: Python runs this in the main thread, where the action runs,
    before the action takes its next step. Stopped longer than the stall window, the run's
    lease lapsed and beat may already have handed it to another worker; the renewal thread
    could only find out after the action had gone on (an action that was about to return
    returns at once), so the process stops now. A shorter stop changes nothing."""
    held, silent = _keeper.stood_still()
    if held and silent > app_settings.STALL_SECONDS:
        lease_lost(held, why=f"this process stood still {silent:.1f} s, past the stall window")


@worker_process_init.connect
def stop_actions_resumed_past_their_lease(**_: Any) -> None:
    if current_process().name != "MainProcess":
        signal.signal(signal.SIGCONT, _on_continue)


_keeper = LeaseKeeper()


def lease(run_id: str) -> AbstractContextManager[None]:
    """``with lease(run_id): ...`` — keep the run's lease fresh while executing it."""
    return _keeper.hold(run_id)


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
    now = now or timezone.now()
    clock = time.monotonic()
    if _Watch.since is None or clock - _Watch.last > 3 * app_settings.BEAT_TICK_SECONDS + 1:
        _Watch.since = clock
    _Watch.last = clock
    watched = clock - _Watch.since >= app_settings.STALL_SECONDS
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
    # A queue with ready messages has a backlog, not a loss: its runs wait their turn.
    idle = [queue for queue in sorted(queues) if ready_messages(queue) == 0]
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
