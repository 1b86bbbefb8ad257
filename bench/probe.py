"""Diagnostic instants for scenario 1's late runs (``BENCH_PROBE=1``; off in the measured
runs, since a log line per run costs the worker time of its own).

Loaded into the bench's worker with ``--include bench.probe``, it logs per run the instant
the main process's ETA timer handed the run on (``Consumer.apply_eta_task``), the instants
a pool process began and ended it (``task_prerun``/``task_postrun``), and every garbage
collection of 2 ms or more in any of the worker's processes. With the run's due instant and the
claim's ``started_at`` that splits a late start into timer, hand-over to the pool and the
child's own way to the claim (``bench.lateness.probe_split``).
"""

from __future__ import annotations

import gc
import logging
import os
import time
from typing import Any

from celery.signals import task_postrun, task_prerun
from celery.worker.consumer import consumer

log = logging.getLogger("bench.probe")
_apply_eta_task = consumer.Consumer.apply_eta_task


def apply_eta_task(self: Any, task: Any) -> None:
    log.warning("probe fired %s %.6f", task.id, time.time())
    _apply_eta_task(self, task)


consumer.Consumer.apply_eta_task = apply_eta_task  # type: ignore[method-assign]


@task_prerun.connect
def began(task_id: str | None = None, **_: Any) -> None:
    log.warning("probe began %s %.6f", task_id, time.time())


@task_postrun.connect
def ended(task_id: str | None = None, **_: Any) -> None:
    log.warning("probe ended %s %.6f %d", task_id, time.time(), os.getpid())


_gc_started = [0.0]


def _gc_pauses(phase: str, info: dict[str, Any]) -> None:
    """Garbage collections of 2 ms or more, with the process that paused."""
    if phase == "start":
        _gc_started[0] = time.perf_counter()
        return
    took = (time.perf_counter() - _gc_started[0]) * 1000
    if took >= 2:
        log.warning(
            "probe gc pid=%d gen=%d collected=%d took=%.1fms at %.6f",
            os.getpid(),
            info["generation"],
            info["collected"],
            took,
            time.time(),
        )


gc.callbacks.append(_gc_pauses)
