"""Scenario 3: execution throughput of no-op runs (whole lifecycle recorded) on a 2-process
worker, beside raw Celery no-op tasks on the same broker, same run.

Both get the whole backlog published before the worker starts; the rate is
``(n - 1) / (last start - first start)``. Ours records claim (queued -> running), the action,
completion, lateness and the task's status per run; raw Celery records one timestamp.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import redis

from bench import common

SIZES = {"full": {"runs": 6_000}, "quick": {"runs": 1_500}}


def measure_ours(n: int) -> dict[str, Any]:
    from django.db import connection
    from django.db.models import Max, Min

    from tasks_app import dispatch
    from tasks_app.models import Run, RunStatus

    common.reset_tables()
    tasks = common.create_tasks("exec", 200)
    with connection.cursor() as cur:
        cur.execute(
            """INSERT INTO tasks_app_run (id, task_id, trigger, status, attempt, scheduled_for,
                   due_at, created_at, worker, output, truncated, error)
               SELECT gen_random_uuid(), (%s::text[])[1 + (g %% %s)], 'api', 'pending', 1,
                      now(), now(), now(), '', '', false, ''
               FROM generate_series(1, %s) AS g""", [tasks, len(tasks), n])
    with common.processes() as procs:
        procs.append(common.start_worker())  # declares the queue as Celery does (priorities)
        publish_started = time.monotonic()
        released = dispatch.release_due_runs()
        publish_s = time.monotonic() - publish_started
        done = Run.objects.filter(status__in=[RunStatus.COMPLETED, RunStatus.FAILED])
        common.wait_until(lambda: done.count() >= n, timeout=600, interval=1)
    # The worker starts on the first released runs while the rest are published: the rate is
    # taken from the run timestamps, not from the publishing.
    agg = Run.objects.aggregate(first=Min("started_at"), last=Max("started_at"))
    completed = Run.objects.filter(status=RunStatus.COMPLETED).count()
    span = (agg["last"] - agg["first"]).total_seconds() if agg["first"] else None
    common.reset_tables()
    return {"runs": n, "released": released, "publish_s": round(publish_s, 2),
            "publish_per_s": round(released / publish_s, 1) if publish_s else None,
            "completed": completed, "span_s": round(span, 2) if span else None,
            "runs_per_s": round((completed - 1) / span, 1) if span else None}


def measure_raw(n: int) -> dict[str, Any]:
    queue, key = f"bench-raw-{os.getpid()}", f"bench:raw:{os.getpid()}"
    env = {"ANCHOR_MODE": "classic", "ANCHOR_QUEUE": queue, "ANCHOR_KEY": key}
    from bench import anchor_app

    store = redis.Redis.from_url(os.environ["REDIS_URL"])
    store.delete(key)
    try:
        with anchor_app.app.producer_or_acquire() as producer:
            for _ in range(n):
                anchor_app.raw_noop.apply_async(queue=queue, producer=producer)
        with common.processes() as procs:
            procs.append(common.start_worker(app="bench.anchor_app", queue=queue,
                                             name="anchor-raw", **env))
            common.wait_until(lambda: store.llen(key) >= n, timeout=600, interval=0.5)
        stamps = sorted(float(x) for x in store.lrange(key, 0, -1))
    finally:
        store.delete(key)
        common.delete_queues(queue)
    span = stamps[-1] - stamps[0] if len(stamps) > 1 else None
    return {"tasks": n, "completed": len(stamps), "span_s": round(span, 2) if span else None,
            "tasks_per_s": round((len(stamps) - 1) / span, 1) if span else None}


def run(results_dir: Path, *, quick: bool = False) -> dict[str, Any]:
    n = SIZES["quick" if quick else "full"]["runs"]
    ours = measure_ours(n)
    raw = measure_raw(n)
    return {"scenario": "execution_throughput", "inputs": {"runs": n, "worker_processes": 2},
            "ours": ours, "anchor_raw_celery": raw,
            "ratios": {"runs_per_s_vs_raw": common.ratio(ours["runs_per_s"], raw["tasks_per_s"])},
            "targets": {"runs_per_s_vs_raw": 0.5}}
