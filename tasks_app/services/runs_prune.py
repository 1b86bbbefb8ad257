"""Retention: finished runs (and their django-celery-results rows) are deleted once old.

The rule, in one place:

- a finished run (``FINAL_RUN_STATUSES``) is deleted once its due instant is older than
  ``TASKS_RUN_RETENTION_DAYS``; failed runs (``failed``, ``retrying``, ``expired``: what an
  operator looks into) after ``TASKS_FAILED_RUN_RETENTION_DAYS``;
- a task's ``keep_runs_days`` replaces both for its runs; its ``keep_runs_count`` also deletes
  its finished runs beyond the newest N;
- pending, queued and running runs are never deleted; ``0`` days keeps everything;
- a run's django-celery-results row goes with it; results of their own (stock beat entries)
  after the same days by their ``date_done`` (``FAILURE`` ones after the failed days).

Deletion is in batches of ``TASKS_RETENTION_BATCH`` rows, oldest first, one short statement
each (``tasks_app/store/queries.sql``: ``prune_runs``, ``prune_task_runs``,
``prune_task_results``), reading ``run_status_due_idx`` / ``run_task_due_idx``, so a batch
costs the same at any table size and never holds locks for long. Rows another session holds
are skipped (``SKIP LOCKED``), so two pruners never wait on each other. Why batched deletes
and not time partitions: docs/operations.md#retention.

The leading beat runs :func:`runs_prune` continuously from a thread of its own
(``tasks_app.beat.prune_thread``); ``manage.py tasks prune`` runs one pass.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q

from .. import store
from ..conf import app_settings
from ..models import FINAL_RUN_STATUSES, RunStatus, Task
from ..runtime import clock
from . import permissions

log = logging.getLogger(__name__)

FAILED_RUN_STATUSES = frozenset({RunStatus.FAILED, RunStatus.RETRYING, RunStatus.EXPIRED})


@dataclass
class PruneReport:
    """What one pass deleted; ``complete`` when nothing expired is left."""

    runs: int = 0
    task_results: int = 0
    batches: int = 0
    seconds: float = 0.0
    complete: bool = True
    by_step: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "task_results": self.task_results,
            "batches": self.batches,
            "seconds": round(self.seconds, 3),
            "complete": self.complete,
        }


def _cutoff(now: datetime, days: float) -> datetime | None:
    return now - timedelta(days=days) if days > 0 else None


def prune_plan(*, now: datetime) -> Iterator[tuple[str, Callable[..., int], dict[str, Any]]]:
    """The statements of one pass: ``(step, store function, its arguments but the batch)``,
    in order.

    Global cutoffs by status first (every task without ``keep_runs_days``), then each task
    with a rule of its own, then stock results.
    """
    keep = _cutoff(now, app_settings.RUN_RETENTION_DAYS)
    keep_failed = _cutoff(now, app_settings.FAILED_RUN_RETENTION_DAYS)
    own_rules = list(
        Task.objects.filter(Q(keep_runs_days__isnull=False) | Q(keep_runs_count__isnull=False))
        .order_by("id")
        .values_list("id", "keep_runs_days", "keep_runs_count")
    )
    own_days = [task_id for task_id, days, _ in own_rules if days is not None]
    for status in sorted(FINAL_RUN_STATUSES):
        cutoff = keep_failed if status in FAILED_RUN_STATUSES else keep
        if cutoff is not None:
            yield (
                f"status:{status}",
                store.prune_runs,
                {"status": status, "cutoff": cutoff, "except_tasks": own_days},
            )
    finished = sorted(FINAL_RUN_STATUSES)
    for task_id, days, count in own_rules:
        cutoffs = []
        if days is not None:
            cutoffs.append(now - timedelta(days=days))
        if count is not None:
            cutoff = store.task_keep_count_cutoff(task_id=task_id, statuses=finished, keep=count)
            if cutoff is not None:
                cutoffs.append(cutoff)
        if cutoffs:
            yield (
                f"task:{task_id}",
                store.prune_task_runs,
                {"task_id": task_id, "statuses": finished, "cutoff": max(cutoffs)},
            )
    if keep is not None or keep_failed is not None:
        far_past = now - timedelta(days=365 * 1000)  # "never" for a kind kept forever
        yield (
            "task_results",
            store.prune_task_results,
            {"cutoff": keep or far_past, "failed_cutoff": keep_failed or far_past},
        )


def runs_prune(
    *,
    now: datetime | None = None,
    batch: int | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    pause: Callable[[float], None] | None = None,
    by: permissions.Actor = "",
) -> PruneReport:
    """One retention pass: every expired row, ``batch`` rows per statement (each its own
    short transaction), until none is left or ``should_stop()``.

    ``pause(seconds_the_batch_took)`` is called after every full batch: the beat thread
    sleeps there so that deletion takes at most ``TASKS_RETENTION_SHARE`` of its time.
    Idempotent and safe to run from several processes at once. ``by`` a user needs
    ``delete_run``.
    """
    name = permissions.authorize(by, "prune")
    now = now or clock.now()
    batch = batch or app_settings.RETENTION_BATCH
    report = PruneReport()
    started = time.perf_counter()
    for step, prune, params in prune_plan(now=now):
        while True:
            if should_stop():
                report.complete = False
                report.seconds = time.perf_counter() - started
                return report
            batch_started = time.perf_counter()
            deleted = prune(**params, batch=batch)
            report.batches += 1
            report.by_step[step] = report.by_step.get(step, 0) + deleted
            if step == "task_results":
                report.task_results += deleted
            else:
                report.runs += deleted
            if deleted < batch:
                break
            if pause is not None:
                pause(time.perf_counter() - batch_started)
    report.seconds = time.perf_counter() - started
    if report.runs or report.task_results:
        log.info(
            "retention: deleted %d runs and %d task results in %.1f s by %s",
            report.runs,
            report.task_results,
            report.seconds,
            name or "beat",
            extra={"by": name},
        )
    return report
