"""Scenario ``execution_in_process``: what a run's bookkeeping costs, without broker or pool.

One process executes queued no-op runs one after another as a pool process does
(``run_execution.run_execute``: claim, the action, completion) and makes the floor's two one-row
``UPDATE``s (``bench.anchor_app.two_writes``) as many times on a connection of its own
(``bench.execution.measure_in_process``), the two taking turns in chunks of 200; per run,
the median of the rounds of each figure: wall time, this process's CPU, its Postgres
backend's CPU. Also the statements a run sends (every statement on the process's
connections, counted over the rounds' runs). The ``execution`` scenario has the same pair
as its in-process row; this one runs it alone, with more rounds, to see a change to the
statements quickly.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from bench import common, execution
from tasks_app.worker import run_execution

SIZES = {
    "full": {"runs": 3_000, "rounds": 5},
    "quick": {"runs": 1_000, "rounds": 3},
}
FIGURES = ("wall_ms", "client_cpu_ms", "postgres_cpu_ms")


def statements_per_run(n: int) -> float:
    """Statements Django's connection sends per ``run_execution.run_execute`` of a queued no-op
    run, over ``n`` runs (each psycopg ``execute``: one round trip)."""
    import logging

    import psycopg
    from django.db import connection

    from tasks_app.models import Run

    execution._load_runs("count", n, status="queued")
    ids = [str(i) for i in Run.objects.values_list("id", flat=True)]
    run_execution.run_execute(run_id=ids[0], worker="bench-count")  # connects, prepares
    connection.ensure_connection()
    raw = connection.connection
    sent = 0
    original = psycopg.Cursor.execute

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal sent
        if self.connection is raw:
            sent += 1
        return original(self, *args, **kwargs)

    psycopg.Cursor.execute = counting  # type: ignore[method-assign]
    logging.disable(logging.INFO)  # as in the timed rounds: no line per run in the bench log
    try:
        for run_id in ids[1:]:
            run_execution.run_execute(run_id=run_id, worker="bench-count")
    finally:
        psycopg.Cursor.execute = original  # type: ignore[method-assign]
        logging.disable(logging.NOTSET)
    common.reset_tables()
    return round(sent / (len(ids) - 1), 2)


def run(results_dir: Path, *, quick: bool = False) -> dict[str, Any]:
    size = SIZES["quick" if quick else "full"]
    rounds = [execution.measure_in_process(size["runs"]) for _ in range(size["rounds"])]
    ours = {k: statistics.median(r["ours"][k] for r in rounds) for k in FIGURES}
    floor = {k: statistics.median(r["floor"][k] for r in rounds) for k in FIGURES}
    return {
        "scenario": "execution_in_process",
        "inputs": {"runs": size["runs"], "rounds": size["rounds"]},
        "ours": {**ours, "statements_per_run": statements_per_run(min(size["runs"], 500))},
        "anchor_two_writes_floor": {**floor, "statements_per_run": 2},
        "rounds": rounds,
        "ratios": {f"{k}_vs_floor": common.ratio(ours[k], floor[k]) for k in FIGURES},
        "targets": {"wall_ms_vs_floor": 1.5, "postgres_cpu_ms_vs_floor": 2.0},
        "settings": "one process, no broker: run_execution.run_execute per queued no-op run "
        "against the floor's two one-row UPDATEs (autocommitted, prepared); per run, the "
        "median of the rounds of each figure",
    }
