"""Scenario 3: execution throughput of no-op runs (whole lifecycle recorded) on a 2-process
worker, beside raw Celery no-op tasks on the same broker, same run.

Raw Celery gets its whole backlog published before its worker starts; ours is released
while the worker runs (it declares the queue). The rate is
``(n - 1) / (last start - first start)``. Ours records claim (queued -> running), the action,
completion, lateness and the task's status per run; raw Celery records one timestamp. An extra
anchor row runs raw Celery with our delivery settings (late ack, prefetch 1), to tell what the
delivery guarantees cost from what the recorded lifecycle costs, and a floor row runs raw Celery
tasks with our delivery settings that each make two one-row Postgres writes (start and end),
the least any design recording both ends of every run durably can cost.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from bench import common

SIZES = {"full": {"runs": 6_000}, "quick": {"runs": 1_500}}


def measure_ours(n: int) -> dict[str, Any]:
    from django.db import connection
    from django.db.models import Max, Min

    from tasks_app import services
    from tasks_app.models import Run, RunStatus

    common.reset_tables()
    tasks = common.create_tasks("exec", 200)
    with connection.cursor() as cur:
        cur.execute(
            """INSERT INTO tasks_app_run (id, task_id, trigger, status, attempt, scheduled_for,
                   due_at, created_at, worker, output, truncated, error)
               SELECT gen_random_uuid(), (%s::text[])[1 + (g %% %s)], 'api', 'pending', 1,
                      now(), now(), now(), '', '', false, ''
               FROM generate_series(1, %s) AS g""",
            [tasks, len(tasks), n],
        )
    with common.processes() as procs:
        procs.append(common.start_worker())  # declares the queue as Celery does (priorities)
        publish_started = time.monotonic()
        released = services.release_due_runs()
        publish_s = time.monotonic() - publish_started
        done = Run.objects.filter(status__in=[RunStatus.COMPLETED, RunStatus.FAILED])
        common.wait_until(lambda: done.count() >= n, timeout=600, interval=1)
    # The worker starts on the first released runs while the rest are published: the rate is
    # taken from the run timestamps, not from the publishing.
    agg = Run.objects.aggregate(first=Min("started_at"), last=Max("started_at"))
    completed = Run.objects.filter(status=RunStatus.COMPLETED).count()
    span = (agg["last"] - agg["first"]).total_seconds() if agg["first"] else None
    common.reset_tables()
    return {
        "runs": n,
        "released": released,
        "publish_s": round(publish_s, 2),
        "publish_per_s": round(released / publish_s, 1) if publish_s else None,
        "completed": completed,
        "span_s": round(span, 2) if span else None,
        "runs_per_s": round((completed - 1) / span, 1) if span else None,
    }


# Our delivery settings (project/settings.py), for the extra anchor row: the same no-op task
# acknowledged late, one message per process, handed back if its process dies.
SAME_DELIVERY = """task_acks_late = True
task_reject_on_worker_lost = True
worker_prefetch_multiplier = 1
"""


def measure_raw(n: int, *, kind: str = "default") -> dict[str, Any]:
    """Raw Celery tasks on their own queue. ``kind``:

    - ``default``: no-op tasks, Celery's default delivery (early ack, prefetch multiplier 4);
    - ``same``: no-op tasks with our delivery settings (a config module,
      ``CELERY_CONFIG_MODULE``, written for the run);
    - ``floor``: our delivery settings and time limits, and each task makes two one-row
      ``UPDATE`` round trips to Postgres (its start and its end, autocommitted): what any
      design that durably records both ends of every run pays on this machine.
    """
    # A fresh queue name per measurement: kombu remembers which queues a pooled connection
    # declared, so re-using a name deleted by the previous measurement drops the messages.
    suffix = f"{os.getpid()}-{kind}"
    queue, key = f"bench-raw-{suffix}", f"bench:raw:{suffix}"
    env = {"ANCHOR_MODE": "classic", "ANCHOR_QUEUE": queue, "ANCHOR_KEY": key}
    if kind != "default":
        config_dir = Path(tempfile.mkdtemp(prefix="bench-anchor-config-"))
        (config_dir / "anchor_same_delivery.py").write_text(SAME_DELIVERY)
        env.update(
            CELERY_CONFIG_MODULE="anchor_same_delivery",
            PYTHONPATH=os.pathsep.join([str(config_dir), str(common.ROOT)]),
        )
    from bench import anchor_app

    if kind == "floor":
        _reset_floor_table(anchor_app.FLOOR_ROWS)
    store = redis.Redis.from_url(os.environ["REDIS_URL"])
    store.delete(key)
    try:
        with anchor_app.app.producer_or_acquire() as producer:
            for i in range(n):
                if kind == "floor":
                    anchor_app.raw_two_writes.apply_async(
                        (i % anchor_app.FLOOR_ROWS,),
                        queue=queue,
                        producer=producer,
                        soft_time_limit=3600,
                        time_limit=3605,
                    )
                else:
                    anchor_app.raw_noop.apply_async(queue=queue, producer=producer)
        with common.processes() as procs:
            procs.append(
                common.start_worker(app="bench.anchor_app", queue=queue, name="anchor-raw", **env)
            )
            common.wait_until(lambda: store.llen(key) >= n, timeout=600, interval=0.5)
        stamps = sorted(float(x) for x in store.lrange(key, 0, -1))
    finally:
        store.delete(key)
        common.delete_queues(queue)
    span = stamps[-1] - stamps[0] if len(stamps) > 1 else None
    return {
        "tasks": n,
        "completed": len(stamps),
        "span_s": round(span, 2) if span else None,
        "tasks_per_s": round((len(stamps) - 1) / span, 1) if span else None,
    }


def _reset_floor_table(rows: int) -> None:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS bench_floor")
        cur.execute(
            "CREATE TABLE bench_floor (id int PRIMARY KEY, started bigint, finished bigint)"
        )
        cur.execute("INSERT INTO bench_floor SELECT g, 0, 0 FROM generate_series(0, %s) g", [rows])


def run(results_dir: Path, *, quick: bool = False) -> dict[str, Any]:
    n = SIZES["quick" if quick else "full"]["runs"]
    ours = measure_ours(n)
    raw = measure_raw(n)
    same = measure_raw(n, kind="same")
    floor = measure_raw(n, kind="floor")
    return {
        "scenario": "execution_throughput",
        "inputs": {"runs": n, "worker_processes": 2},
        "ours": ours,
        "anchor_raw_celery": raw,
        "extra_anchor_raw_celery_same_delivery": {
            **same,
            "settings": "task_acks_late, task_reject_on_worker_lost, prefetch 1",
        },
        "extra_anchor_two_writes_floor": {
            **floor,
            "settings": "same delivery + time limits; two one-row UPDATE round trips per task",
        },
        "ratios": {
            "runs_per_s_vs_raw": common.ratio(ours["runs_per_s"], raw["tasks_per_s"]),
            "extra_runs_per_s_vs_raw_same_delivery": common.ratio(
                ours["runs_per_s"], same["tasks_per_s"]
            ),
            "extra_runs_per_s_vs_two_writes_floor": common.ratio(
                ours["runs_per_s"], floor["tasks_per_s"]
            ),
            "extra_two_writes_floor_vs_raw": common.ratio(floor["tasks_per_s"], raw["tasks_per_s"]),
        },
        "targets": {"runs_per_s_vs_raw": 0.5},
    }
