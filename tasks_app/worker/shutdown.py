"""A worker's shutdown (a deploy's SIGTERM, Ctrl-C): running runs get a grace period to
finish, and whatever still runs after it is handed back to the broker for another worker.

- **The main process decides.** Pool processes ignore SIGTERM: a platform signals every
  process of a container or dyno (Heroku), and a pool process dying with its run would make
  that run an interruption for no reason. The main process starts Celery's warm shutdown
  (it stops taking messages; prefetched messages go back to the broker with its connection)
  and waits for the running runs.
- **Grace.** If runs are still running ``TASKS_SHUTDOWN_GRACE_SECONDS`` after the signal,
  the pool processes are killed (SIGKILL). Their database sessions end, which releases their
  runs' executor locks; the main process hands their messages back to the broker
  (``reject_on_worker_lost``); the worker that receives one finds its run orphaned and
  interrupts it (``run_lifecycle._recover_if_orphaned``): a new attempt starts at once, not
  counted against ``max_retries``. The worker then exits, before the platform's SIGKILL.

Why not Celery's own soft shutdown (``worker_soft_shutdown_timeout``, Celery 5.5): it is a
part of the *cold* shutdown (SIGQUIT, or SIGTERM only with ``REMAP_SIGTERM=SIGQUIT`` in the
environment before Celery is imported), and it sleeps the whole timeout even when every run
finished in its first second, with the worker's event loop stopped meanwhile.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Any

from billiard.process import current_process
from celery.signals import worker_init, worker_process_init, worker_shutting_down
from celery.worker import state

from ..conf import app_settings

log = logging.getLogger(__name__)
_state: dict[str, Any] = {"worker": None, "timer": None}


@worker_init.connect
def remember_worker(sender: Any = None, **_: Any) -> None:
    """The main process keeps its worker (to find its pool processes at the deadline)."""
    _state["worker"] = sender


@worker_process_init.connect
def ignore_sigterm_in_pool_process(**_: Any) -> None:
    """A prefork pool process leaves SIGTERM to its main process (the solo pool sends this
    signal in the main process itself, which must keep its handler)."""
    if current_process().name != "MainProcess":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


@worker_shutting_down.connect
def start_grace_period(**_: Any) -> None:
    """On the first shutdown signal, arm the deadline after which running runs are handed
    back (runs inside a Celery signal handler, in the main process)."""
    if _state["timer"] is not None:
        return
    grace = app_settings.SHUTDOWN_GRACE_SECONDS
    running = len(state.active_requests)
    if running:
        log.warning("worker shutting down: %d running runs have %g s to finish", running, grace)
    timer = threading.Timer(grace, hand_back_running_runs)
    timer.daemon = True
    _state["timer"] = timer
    timer.start()


def busy_pool_pids(worker: Any) -> list[int] | None:
    """The pids of a prefork worker's pool processes executing a task; ``None`` for other
    pools (their tasks execute in the main process)."""
    pool = getattr(getattr(worker, "pool", None), "_pool", None)
    processes = getattr(pool, "_pool", None)
    if processes is None:
        return None
    pids = {p.pid for p in processes if p.pid}
    return sorted({r.worker_pid for r in state.active_requests} & pids)


def hand_back_running_runs() -> None:
    """The grace period is over: end the runs still running so their messages go back to the
    broker and their runs are recovered by another worker as interruptions."""
    pids = busy_pool_pids(_state["worker"])
    if pids is None:  # solo/threads pool: the runs execute in this process
        log.warning(
            "shutdown grace of %g s over; exiting with runs still running (handed back)",
            app_settings.SHUTDOWN_GRACE_SECONDS,
        )
        os._exit(1)
    log.warning(
        "shutdown grace of %g s over; handing back the runs still running (pool processes %s)",
        app_settings.SHUTDOWN_GRACE_SECONDS,
        ", ".join(map(str, pids)) or "none left",
    )
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:  # already exited (its run finished)
            continue
