"""Diagnostic instants for scenario 1's late runs (``BENCH_PROBE=1``; off in the measured
runs, since a log line per run costs the worker time of its own).

Loaded into the bench's worker with ``--include bench.probe``, it logs per run the instant
the main process's ETA timer handed the run on (``Consumer.apply_eta_task``) and the
instant a pool process began it (``task_prerun``). With the run's due instant and the
claim's ``started_at`` that splits a late start into timer, hand-over to the pool and the
child's own way to the claim (``bench.lateness.probe_split``).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from celery.signals import task_prerun
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
