"""Scenario ``enqueue``: what one ``.enqueue()`` of a ``@task`` function costs the caller.

Three sides, each a call as a view makes it (autocommit: the call is its own transaction),
taking turns in chunks of ``CHUNK`` calls so that all meet the same machine, after
``WARMUP`` calls each; per call, the median over the rounds of each side's median:

- ``ours``: ``bench.enqueue_functions.noop.enqueue(i)`` through ``CeleryRunBackend`` (the
  run stored, its message published when the transaction commits);
- ``floor``: what an enqueue cannot do without: one prepared one-row ``INSERT`` (autocommit)
  and one publish of the same kind of message on the same broker connection pool;
- ``celery_publish``: a bare ``send_task`` (Celery's ``.delay()`` without a task object), no
  database.

Nothing consumes the messages: the bench queue is deleted afterwards. The anchors of the
issue that asked for this figure (django-tasks-db's ``DatabaseBackend``, django-ox) are not
measured here yet.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import common

SIZES = {"full": {"calls": 200, "rounds": 5}, "quick": {"calls": 100, "rounds": 2}}
CHUNK = 20
WARMUP = 20
FLOOR_TABLE = "bench_enqueue_floor"


def _sides() -> dict[str, Callable[[int], Any]]:
    import os

    import psycopg

    from bench.enqueue_functions import noop
    from project.celery import app

    pg = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
    pg.execute(f"DROP TABLE IF EXISTS {FLOOR_TABLE}")
    pg.execute(f"CREATE TABLE {FLOOR_TABLE} (id bigserial PRIMARY KEY, args jsonb, at timestamptz)")

    def floor(i: int) -> None:
        pg.execute(
            f"INSERT INTO {FLOOR_TABLE} (args, at) VALUES (%s, now())",
            [f"[{i}]"],
            prepare=True,
        )
        app.send_task("bench.noop", args=[i], queue=common.QUEUE)

    def celery_publish(i: int) -> None:
        app.send_task("bench.noop", args=[i], queue=common.QUEUE)

    return {"ours": lambda i: noop.enqueue(i), "floor": floor, "celery_publish": celery_publish}


def measure(calls: int) -> dict[str, float]:
    """Median milliseconds per call of each side, taking turns in chunks."""
    sides = _sides()
    for call in sides.values():
        for i in range(WARMUP):
            call(i)
    times: dict[str, list[float]] = {name: [] for name in sides}
    for start in range(0, calls, CHUNK):
        for name, call in sides.items():
            for i in range(start, min(start + CHUNK, calls)):
                began = time.perf_counter()
                call(i)
                times[name].append((time.perf_counter() - began) * 1000)
    return {name: round(statistics.median(values), 3) for name, values in times.items()}


def run(results_dir: Path, *, quick: bool = False) -> dict[str, Any]:
    size = SIZES["quick" if quick else "full"]
    rounds = []
    for _ in range(size["rounds"]):
        rounds.append(measure(size["calls"]))
        common.reset_tables()
        common.delete_queues(common.QUEUE)
    per_call = {name: statistics.median(r[name] for r in rounds) for name in rounds[0]}
    return {
        "scenario": "enqueue",
        "inputs": {"calls": size["calls"], "rounds": size["rounds"], "chunk": CHUNK},
        "per_call_ms": per_call,
        "rounds": rounds,
        "ratios": {
            "ours_vs_floor": common.ratio(per_call["ours"], per_call["floor"]),
            "ours_vs_celery_publish": common.ratio(per_call["ours"], per_call["celery_publish"]),
        },
        "targets": {"ours_vs_floor": 1.5},
        "settings": "one process, autocommit; per call the median over rounds of each side's "
        "median; floor = one prepared INSERT + one send_task on the same broker",
    }
