"""Recovery, the worker's side: its lease on the runs it executes (beat's side, the sweep over
runs that lost their worker, their message or their deadline, is ``tasks_app.beat.sweep``).
The guarantees are in docs/reliability.md.

While a run executes, one daemon thread per worker process renews its ``heartbeat_at`` every
``TASKS_HEARTBEAT_SECONDS``. The thread lives in the process that runs the action, so when
that process dies (SIGKILL, OOM, the hard time limit, the whole machine) the renewals stop
with it. A pool process that stood still past the stall window (SIGSTOP, a frozen VM) may
have had its run handed to another worker: it kills itself rather than let its action run on
beside the run's next attempt — at SIGCONT, before the action takes another step, or when
its next renewal finds the run ended by the sweep, interrupted, failed or retried (the main
process replaces it, as after any lost pool process): no outcome is recorded twice and no
retry overlaps the attempt it replaces.

The same thread carries a person's request to stop a running run (``services.run_cancel``)
to the run: every ``TASKS_CANCEL_CHECK_SECONDS`` it looks for requests on the runs its
process holds and marks them where the action asks (``ctx.cancel_requested()``,
``tasks_app.actions.cancel_requested()``). An action that has not returned
``TASKS_CANCEL_GRACE_SECONDS`` after the request is ended like a lost lease: the run is
recorded ``cancelled`` and the pool process kills itself (its main process replaces it).

The lease's writes are service functions (``tasks_app.worker.lease_writes``).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any

from billiard.process import current_process
from celery.signals import worker_process_init
from django.db import close_old_connections, connection

from ..actions import cancellation
from ..conf import app_settings
from ..runtime import clock
from .lease_writes import run_cancel_requests, run_renew_leases, run_stop_cancelled

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Renews the lease of every run this process is executing, from one daemon thread.

    Started lazily in the process that executes runs (a prefork pool child, a thread-pool
    worker, a solo worker); a fork gets a fresh thread and an empty set.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, datetime] = {}  # run id -> when this process began holding it
        self._finishing: set[str] = set()  # held runs whose outcome this process is recording
        self._renewed_at = time.monotonic()  # the last renewal, or the first hold after it
        # held runs asked to stop -> when (time.monotonic()) their grace ends
        self._stop_at: dict[str, float] = {}
        self._thread: threading.Thread | None = None
        self._pid = 0

    @contextmanager
    def hold(self, run_id: str) -> Iterator[Callable[[], None]]:
        """Renew ``run_id``'s lease for as long as the block runs. The block calls what it is
        given right before recording the run's outcome: from then on, the run not running
        any more is this process's own doing, not a loss."""
        with self._lock:
            self._ensure_thread()
            if not self._runs:
                self._renewed_at = time.monotonic()
            self._runs[run_id] = clock.now()
        cancellation.begin(run_id)

        def finishing() -> None:
            with self._lock:
                self._finishing.add(run_id)

        try:
            yield finishing
        finally:
            with self._lock:
                self._runs.pop(run_id, None)
                self._finishing.discard(run_id)
                self._stop_at.pop(run_id, None)
            cancellation.end(run_id)

    def _ensure_thread(self) -> None:
        if self._pid != os.getpid():
            self._pid, self._runs, self._finishing, self._thread = os.getpid(), {}, set(), None
            self._stop_at = {}
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name="run-lease", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        next_renewal = time.monotonic() + app_settings.HEARTBEAT_SECONDS
        while True:
            time.sleep(self._pause(next_renewal))
            with self._lock:
                held = dict(self._runs)
            if not held:
                next_renewal = time.monotonic() + app_settings.HEARTBEAT_SECONDS
                continue
            self._serve_cancels(held)
            if time.monotonic() < next_renewal:
                continue
            next_renewal = time.monotonic() + app_settings.HEARTBEAT_SECONDS
            try:
                close_old_connections()  # this thread's own connection, health-checked
                started = time.monotonic()
                lost = run_renew_leases(held=held, now=clock.now())
            except Exception:  # the database blinked: renew on the next beat
                log.warning("renewing the lease of %d runs failed", len(held), exc_info=True)
                connection.close()
                continue
            self._renewed_at = started
            with self._lock:  # read after the statement: see run_renew_leases
                lost = [run_id for run_id in lost if run_id not in self._finishing]
            if lost:
                lease_lost(lost, why="ended by the sweep (interrupted, failed or retried)")

    def _pause(self, next_renewal: float) -> float:
        """Until the next renewal, the next look for cancel requests or the nearest end of a
        cancel's grace, whichever comes first."""
        now = time.monotonic()
        with self._lock:
            ends = list(self._stop_at.values())
        wake = min(next_renewal, now + app_settings.CANCEL_CHECK_SECONDS, *ends)
        return max(wake - now, 0.01)

    def _serve_cancels(self, held: dict[str, datetime]) -> None:
        """Mark the held runs a person asked to stop; end those past their grace."""
        try:
            close_old_connections()
            asked = run_cancel_requests(run_ids=held)
        except Exception:  # the database blinked: look again on the next beat
            log.warning("looking for cancel requests failed", exc_info=True)
            connection.close()
            asked = {}
        now, mono = clock.now(), time.monotonic()
        grace = app_settings.CANCEL_GRACE_SECONDS
        with self._lock:
            for run_id, at in asked.items():
                if run_id in self._runs and run_id not in self._stop_at:
                    cancellation.mark_requested(run_id)
                    left = grace - (now - at).total_seconds()
                    self._stop_at[run_id] = mono + max(left, 0.0)
                    log.info("run %s asked to stop; ended in %.1f s unless it does", run_id, left)
            due = [
                run_id
                for run_id, at in self._stop_at.items()
                if at <= mono and run_id in self._runs and run_id not in self._finishing
            ]
            for run_id in due:
                self._stop_at[run_id] = float("inf")  # ended once
        if due:
            stop_cancelled(due, grace=grace)

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
    _stop_here(f"lease lost on run {', '.join(run_ids)} ({why})")


def stop_cancelled(run_ids: list[str], *, grace: float) -> None:
    """Runs asked to stop whose actions went on past the grace: each is recorded
    ``cancelled``, then the pool process ends (as :func:`lease_lost`; the redelivered
    message finds the run cancelled and is ignored). Should the record fail, the run's end
    is recorded by the redelivery or the sweep, ``cancelled`` too (a cancel request decides
    it). In a solo or threads pool the run is recorded and its action goes on."""
    reason = f"cancelled: its action did not stop within {grace:g} s of the request; ended"
    for run_id in run_ids:
        try:
            run_stop_cancelled(run_id=run_id, reason=reason)
        except Exception:
            log.warning("recording the cancel of run %s failed", run_id, exc_info=True)
            connection.close()
    _stop_here(f"cancel grace over on run {', '.join(run_ids)}")


def _stop_here(what: str) -> None:
    """End the action running here: a prefork pool process kills itself (its main process
    replaces it); the worker's main process (a solo or threads pool) is not killed for one
    run, and its action goes on."""
    if current_process().name == "MainProcess":
        log.error("%s; its action goes on (not a pool process)", what)
        return
    log.error("%s; stopping this pool process", what)
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


def lease(run_id: str) -> AbstractContextManager[Callable[[], None]]:
    """``with lease(run_id) as finishing: ...`` — keep the run's lease fresh while executing
    it; call ``finishing()`` right before recording its outcome."""
    return _keeper.hold(run_id)
