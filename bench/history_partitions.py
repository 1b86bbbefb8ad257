"""Batched deletes or time partitions for retention? Measured on a copy of the runs table.

``python -m bench.history_partitions`` (``DATABASE_URL`` holding a loaded history, see
``bench/history_load.py``) copies ``tasks_app_run`` into ``bench_run_part``, partitioned by
day of ``due_at`` (the primary key becomes ``(id, due_at)``: Postgres requires the partition
key in every unique constraint), and measures on both tables, same rows, same run:

- retention of one day of runs: ``DELETE`` in batches of 5,000 (what ``prune_runs`` does) on
  the plain table, ``DROP TABLE`` of the day's partition on the other;
- the hot path's lookup by run id (``claim_run``/``complete_run`` are ``WHERE id = %s``: a
  message carries the run id only): median of 2,000 lookups of random existing ids, plain
  table against partitioned (which must probe every partition's primary-key index);
- the same lookup when the query also names ``due_at`` (what every message would have to
  carry for partition pruning).

The copy is dropped at the end.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import time
from datetime import timedelta
from typing import Any

BATCH = 5_000


def _timed(conn: Any, sql: str, params: Any = None) -> float:
    start = time.perf_counter()
    conn.execute(sql, params)
    return (time.perf_counter() - start) * 1000


def measure(conn: Any, *, lookups: int = 2_000) -> dict[str, Any]:
    from psycopg import sql

    out: dict[str, Any] = {}
    conn.execute("DROP TABLE IF EXISTS bench_run_part")
    lo, hi, total = conn.execute(
        "SELECT date_trunc('day', min(due_at)), date_trunc('day', max(due_at)) + interval '1 day',"
        " count(*) FROM tasks_app_run"
    ).fetchone()
    out["rows"] = total
    start = time.perf_counter()
    conn.execute(
        "CREATE TABLE bench_run_part (LIKE tasks_app_run INCLUDING DEFAULTS) "
        "PARTITION BY RANGE (due_at)"
    )
    day = lo
    days = 0
    while day < hi:
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} PARTITION OF bench_run_part FOR VALUES FROM ({}) TO ({})"
            ).format(
                sql.Identifier(f"bench_run_part_{days}"),
                sql.Literal(day),
                sql.Literal(day + timedelta(days=1)),
            )
        )
        day += timedelta(days=1)
        days += 1
    conn.execute("ALTER TABLE bench_run_part ADD PRIMARY KEY (id, due_at)")
    conn.execute("CREATE INDEX ON bench_run_part (status, due_at DESC)")
    conn.execute("CREATE INDEX ON bench_run_part (task_id, due_at DESC)")
    conn.execute("INSERT INTO bench_run_part SELECT * FROM tasks_app_run")
    conn.execute("VACUUM ANALYZE bench_run_part")
    out["partitions"] = days
    out["copy_s"] = round(time.perf_counter() - start, 1)

    ids = [
        r[0]
        for r in conn.execute(
            "SELECT id, due_at FROM tasks_app_run TABLESAMPLE SYSTEM (1) LIMIT %s", [lookups]
        ).fetchall()
    ]
    dues = dict(
        conn.execute("SELECT id, due_at FROM tasks_app_run WHERE id = ANY(%s)", [ids]).fetchall()
    )
    random.Random(1).shuffle(ids)

    def lookup(table: str, with_due: bool) -> float:
        times = []
        for run_id in ids:
            if with_due:
                sql = f"SELECT status FROM {table} WHERE id = %s AND due_at = %s"  # noqa: S608
                times.append(_timed(conn, sql, [run_id, dues[run_id]]))
            else:
                sql = f"SELECT status FROM {table} WHERE id = %s"  # noqa: S608
                times.append(_timed(conn, sql, [run_id]))
        return round(statistics.median(times), 3)

    out["lookup_by_id_ms"] = {
        "plain": lookup("tasks_app_run", False),
        "partitioned": lookup("bench_run_part", False),
        "partitioned_with_due_at": lookup("bench_run_part", True),
    }
    out["lookup_ratio_partitioned_to_plain"] = round(
        out["lookup_by_id_ms"]["partitioned"] / out["lookup_by_id_ms"]["plain"], 1
    )

    # One day of retention on each table: the oldest whole day.
    first_day = lo + timedelta(days=1)
    bounds = [first_day, first_day + timedelta(days=1)]
    day_rows = conn.execute(
        "SELECT count(*) FROM tasks_app_run WHERE due_at >= %s AND due_at < %s", bounds
    ).fetchone()[0]
    start = time.perf_counter()
    batches = 0
    while True:
        cur = conn.execute(
            "DELETE FROM tasks_app_run WHERE id IN (SELECT id FROM tasks_app_run "
            "WHERE due_at >= %s AND due_at < %s ORDER BY due_at LIMIT %s FOR UPDATE SKIP LOCKED)",
            [*bounds, BATCH],
        )
        batches += 1
        if cur.rowcount < BATCH:
            break
    delete_s = time.perf_counter() - start
    start = time.perf_counter()
    conn.execute("DROP TABLE bench_run_part_1")
    drop_s = time.perf_counter() - start
    out["one_day"] = {
        "rows": day_rows,
        "batched_delete_s": round(delete_s, 2),
        "batched_delete_rows_per_s": round(day_rows / delete_s) if delete_s else None,
        "batches": batches,
        "drop_partition_ms": round(drop_s * 1000, 1),
    }
    conn.execute("DROP TABLE bench_run_part")
    return out


def main() -> None:
    import psycopg

    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        result = measure(conn)
    print(json.dumps(result, indent=2, default=str))
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as handle:
            json.dump(result, handle, indent=2, default=str)


if __name__ == "__main__":
    main()
