"""Scenario ``fire_insert``: what recording one batch of beat's fires costs, through the
store's one statement (``insert_runs``, which beat's firing issues now) beside the ORM path
it replaced (``Run.objects.bulk_create(..., ignore_conflicts=True)`` then a read-back of the
ids that went in), on the same rows.

Each round builds ``BATCH`` fire runs (one per task, as a busy tick records them: trigger
``schedule``, queued at the tick) and times each side recording them in its own
transaction, rolled back so both write into the same table state; the sides take turns,
the first alternating by round. Half of every batch repeats fires already recorded, so the
"skip what is recorded" part of both is exercised. Per side: the median over rounds, in ms
per batch.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from bench import common

SIZES = {"full": {"batch": 1000, "rounds": 30}, "quick": {"batch": 500, "rounds": 6}}
PREFIX = "fire-insert"


def _fires(task_ids: list[str], at: Any) -> list[Any]:
    from tasks_app.models import RunStatus, Task, Trigger
    from tasks_app.services.run_create import new_run

    tasks = Task.objects.in_bulk(task_ids)
    runs = []
    for task_id in task_ids:
        run = new_run(tasks[task_id], trigger=Trigger.SCHEDULE, due_at=at, scheduled_for=at)
        run.created_at, run.status, run.queued_at = at, RunStatus.QUEUED, at
        runs.append(run)
    return runs


def _orm(runs: list[Any]) -> set[Any]:
    """The path beat's firing took before: bulk_create skipping conflicts, then a read-back."""
    from tasks_app.models import Run

    Run.objects.bulk_create(runs, ignore_conflicts=True, batch_size=2000)
    return set(Run.objects.filter(id__in=[r.id for r in runs]).values_list("id", flat=True))


def _store(runs: list[Any]) -> set[Any]:
    from tasks_app.services.run_create import runs_insert

    return runs_insert(runs)


def _timed(side: Any, runs: list[Any]) -> tuple[float, int]:
    from django.db import transaction

    with transaction.atomic():
        began = time.perf_counter()
        inserted = side(runs)
        took = (time.perf_counter() - began) * 1000
        transaction.set_rollback(True)
    return took, len(inserted)


def run(results_dir: Path, *, quick: bool = False) -> dict[str, Any]:
    from django.utils import timezone

    from tasks_app.models import allow_status_writes

    size = SIZES["quick" if quick else "full"]
    batch, rounds = size["batch"], size["rounds"]
    task_ids = common.create_tasks(PREFIX, batch)
    base = timezone.now().replace(microsecond=0)
    # Half of the tasks already have the fire each round records: those are skipped.
    with allow_status_writes():
        from tasks_app.models import Run

        Run.objects.bulk_create(_fires(task_ids[: batch // 2], base))
    sides = {"store": _store, "orm": _orm}
    times: dict[str, list[float]] = {name: [] for name in sides}
    counts: dict[str, set[int]] = {name: set() for name in sides}
    for i in range(rounds):
        order = list(sides) if i % 2 == 0 else list(reversed(sides))
        runs_by_side = {name: _fires(task_ids, base) for name in sides}
        for name in order:
            took, inserted = _timed(sides[name], runs_by_side[name])
            times[name].append(took)
            counts[name].add(inserted)
    common.reset_tables()
    per_batch = {name: round(statistics.median(values), 3) for name, values in times.items()}
    return {
        "scenario": "fire_insert",
        "inputs": {"batch": batch, "rounds": rounds, "already_recorded": batch // 2},
        "per_batch_ms": per_batch,
        "inserted_per_batch": {name: sorted(c) for name, c in counts.items()},
        "ratios": {"store_vs_orm": common.ratio(per_batch["store"], per_batch["orm"])},
        "targets": {"store_vs_orm": 1.1},
        "settings": "one process; each side records the same batch of fire runs (half already "
        "recorded) in its own transaction, rolled back; sides alternate first; median over "
        "rounds",
    }
