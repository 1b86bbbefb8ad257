"""Load a long run history fast: ``python -m bench.history_load --runs N [--days D]``.

Finished runs spread evenly over the last ``days`` days for ``tasks`` tasks, written with
Postgres ``COPY`` (psycopg 3) after dropping the run table's secondary indexes, which are
rebuilt afterwards from their own definitions (``pg_indexes``): an index maintained row by row
during the load costs several times the load itself. Used by ``bench/history.py`` and to
develop against a large table (``DATABASE_URL`` names the database; its schema is migrated).
"""

from __future__ import annotations

import argparse
import os
import random
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

ACTIONS = ("noop", "echo", "sleep")
# Out of 1,000 finished runs.
STATUS_MIX = (("completed", 960), ("failed", 25), ("expired", 5), ("cancelled", 5), ("skipped", 5))


def _run_id(n: int, rng: random.Random) -> uuid.UUID:
    """Ids that grow with due time (like a UUIDv7): the primary key's b-tree is appended to
    at its right edge during the load instead of at random pages."""
    return uuid.UUID(int=(n << 64) | rng.getrandbits(64))


def _statuses(rng: random.Random, n: int) -> list[str]:
    names = [name for name, _ in STATUS_MIX]
    weights = [w for _, w in STATUS_MIX]
    return rng.choices(names, weights=weights, k=n)


def load(
    conn: Any, *, tasks: int, runs: int, days: float, now: datetime | None = None, seed: int = 42
) -> dict[str, float]:
    """Replace the tasks and runs in ``conn``'s database with ``tasks`` tasks and ``runs``
    finished runs due over ``days`` days before ``now``. Returns the phase timings."""
    now = now or datetime.now(UTC)
    rng = random.Random(seed)
    timings: dict[str, float] = {}
    started = time.perf_counter()
    conn.execute(
        "TRUNCATE tasks_app_run, tasks_app_task, tasks_app_taskstate, tasks_app_runtally, "
        "tasks_app_runtallymark, tasks_app_flowkey"
    )
    with conn.cursor().copy(
        "COPY tasks_app_task (id, name, description, action, payload, queue, priority, "
        "max_retries, retry_backoff_seconds, schedule_type, interval_seconds, cron, timezone, "
        "jitter_seconds, overlap_policy, catchup, catchup_window_seconds, created_at, "
        "updated_at) FROM STDIN"
    ) as copy:
        for i in range(tasks):
            failing = i % 40 == 1
            copy.write_row(
                (
                    f"hist-{i:05d}",
                    f"History task {i}",
                    "",
                    ACTIONS[i % 3],
                    '{"message": "x"}'
                    if i % 3 == 1
                    else ('{"seconds": 0}' if i % 3 == 2 else "{}"),
                    "celery",
                    5,
                    0,
                    10,
                    "interval",
                    300,
                    "",
                    "UTC",
                    0,
                    "allow",
                    "skip",
                    3600,
                    now - timedelta(days=days + 1),
                    now,
                )
            )
    # The trigger gave each task its state row; this load's replaces them.
    conn.execute("DELETE FROM tasks_app_taskstate")
    with conn.cursor().copy(
        "COPY tasks_app_taskstate (task_id, status, next_run_at, consecutive_failures, "
        "fire_count, paused_at, paused_by, pause_note) FROM STDIN"
    ) as copy:
        for i in range(tasks):
            failing, paused = i % 40 == 1, i % 50 == 0
            copy.write_row(
                (
                    f"hist-{i:05d}",
                    "paused" if paused else ("failed" if failing else "pending"),
                    None if paused else now + timedelta(seconds=rng.randint(1, 300)),
                    3 if failing else 0,
                    runs // tasks,
                    now - timedelta(days=1) if paused else None,
                    "bench" if paused else "",
                    "maintenance" if paused else "",
                )
            )
    indexes = conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'tasks_app_run' "
        "AND indexname NOT IN (SELECT conname FROM pg_constraint WHERE contype = 'p')"
    ).fetchall()
    for name, _ in indexes:
        conn.execute(f'DROP INDEX "{name}"')
    # Each task fires at an even step; task i's fires are offset so the table interleaves.
    per_task = max(runs // tasks, 1)
    step = days * 86400 / per_task
    start = now - timedelta(days=days)
    copied = 0
    # The rows are consistent by construction (every task_id exists): skip the per-row
    # foreign-key triggers for this session's COPY.
    conn.execute("SET session_replication_role = replica")
    with conn.cursor().copy(
        "COPY tasks_app_run (id, task_id, trigger, status, attempt, scheduled_for, due_at, "
        "created_at, queued_at, started_at, finished_at, lateness_ms, worker, output, "
        "truncated, error) FROM STDIN"
    ) as copy:
        chunk: list[str] = []
        for k in range(per_task):
            statuses = _statuses(rng, tasks)
            base = start + timedelta(seconds=k * step)
            for i in range(tasks):
                if copied >= runs:
                    break
                due = base + timedelta(seconds=step * i / tasks)
                late = rng.lognormvariate(2.0, 0.8)
                st = due + timedelta(milliseconds=late)
                fin = st + timedelta(milliseconds=rng.uniform(2, 200))
                status = statuses[i]
                d, s, f = due.isoformat(), st.isoformat(), fin.isoformat()
                chunk.append(
                    f"{_run_id(copied, rng)}\thist-{i:05d}\tschedule\t"
                    f"{status}\t1\t{d}\t{d}\t{d}\t{d}\t{s}\t{f}\t{late:.3f}\tbench@host\tok\tf\t"
                    f"{'boom' if status == 'failed' else ''}\n"
                )
                copied += 1
            if len(chunk) >= 50_000:
                copy.write("".join(chunk))
                chunk = []
        if chunk:
            copy.write("".join(chunk))
    conn.execute("SET session_replication_role = DEFAULT")
    timings["copy_s"] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    for _, definition in indexes:
        conn.execute(definition)
    timings["index_s"] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    conn.execute("VACUUM (ANALYZE) tasks_app_run")
    conn.execute("VACUUM (ANALYZE) tasks_app_task")
    timings["vacuum_s"] = round(time.perf_counter() - started, 1)
    timings["runs"] = copied
    return timings


def main() -> None:
    import psycopg

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--tasks", type=int, default=1_000)
    parser.add_argument("--days", type=float, default=90)
    args = parser.parse_args()
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        print(load(conn, tasks=args.tasks, runs=args.runs, days=args.days), flush=True)


if __name__ == "__main__":
    main()
