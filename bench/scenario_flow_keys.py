"""Flow control's cost: the drain rate of no-op runs spread over 1,000 keys at a limit of one
run at once per key, against the same runs with no limit (the anchor), same run.

One task (action ``noop``, ``flow_key`` ``customer``); ``n`` runs due now, each with a
payload naming one of ``KEYS`` customers drawn at random; the backlog published before the
worker (2 processes, the installed project) starts, as in ``execution``. The rate is
``(n - 1) / (last start - first start)``. The two sides alternate over the rounds (the
limited side first in every other round) and each side's median round is compared. With a
limit, every claim is checked under its key's lock (and counted, and the key's row written);
a run whose key is busy is held and let go when the key's run ends.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from bench import common

SIZES = {"full": {"runs": 6_000, "rounds": 3}, "quick": {"runs": 1_500, "rounds": 1}}
KEYS = 1_000


def measure(n: int, *, limited: bool) -> dict[str, Any]:
    from celery import current_app
    from django.db import connection
    from django.db.models import Max, Min

    from tasks_app import services
    from tasks_app.messaging import queues
    from tasks_app.models import Run, RunStatus, Task

    common.reset_tables()
    task = Task.objects.create(
        id="flow-keys",
        action="noop",
        queue=common.QUEUE,
        flow_key="customer",
        concurrency_limit_per_key=1 if limited else None,
    )
    with connection.cursor() as cur:
        cur.execute(
            """INSERT INTO tasks_app_run (id, task_id, trigger, status, attempt, scheduled_for,
                   due_at, created_at, worker, output, truncated, error, payload)
               SELECT gen_random_uuid(), %s, 'api', 'pending', 1, now(), now(), now(),
                      '', '', false, '',
                      jsonb_build_object('customer', 'c' || floor(random() * %s)::int)
               FROM generate_series(1, %s) AS g""",
            [task.pk, KEYS, n],
        )
    common.vacuum("tasks_app_run", "tasks_app_task", "tasks_app_taskstate")
    queues.check(current_app, [common.QUEUE])
    services.release_due_runs()
    with common.processes() as procs:
        procs.append(common.start_worker(shape="installed"))
        done = Run.objects.filter(status=RunStatus.COMPLETED)
        common.wait_until(lambda: done.count() >= n, timeout=900, interval=1)
    agg = Run.objects.aggregate(first=Min("started_at"), last=Max("started_at"))
    span = (agg["last"] - agg["first"]).total_seconds()
    keyed = Run.objects.filter(status=RunStatus.COMPLETED).exclude(flow_key="").count()
    common.reset_tables()
    return {
        "runs": n,
        "span_s": round(span, 2),
        "runs_per_s": round((n - 1) / span, 1),
        "runs_claimed_with_key": keyed,
    }


def run(results_dir: Path, *, quick: bool = False) -> dict[str, Any]:
    size = SIZES["quick" if quick else "full"]
    rounds: list[dict[str, Any]] = []
    for index in range(size["rounds"]):
        order = (False, True) if index % 2 == 0 else (True, False)
        this: dict[str, Any] = {}
        for limited in order:
            started = time.monotonic()
            got = measure(size["runs"], limited=limited)
            got["wall_s"] = round(time.monotonic() - started, 1)
            this["limited" if limited else "unlimited"] = got
        rounds.append(this)
    median = {
        side: statistics.median(r[side]["runs_per_s"] for r in rounds)
        for side in ("unlimited", "limited")
    }
    return {
        "scenario": "flow_keys",
        "inputs": {"runs": size["runs"], "rounds": size["rounds"], "keys": KEYS, "limit": 1},
        "runs_per_s": median,
        "ratio_limited_vs_unlimited": common.ratio(median["limited"], median["unlimited"]),
        "rounds": rounds,
        "machine": common.machine(),
    }
