"""Scenario ``enqueued_pages``: the pages after 1,000,000 enqueues of 5 ``@task`` functions.
The task list must show 5 tasks (one per function, not one per call) and every page below
keep its p95 at most 300 ms (``--quick``: 100,000 enqueues).

Seed, on the bench database: each function's task made by real enqueues (``enqueue_many``
of ``REAL_CALLS`` calls each: the task made on the function's first enqueue, the runs
written and published; the messages are then deleted, as nothing consumes them, and those
runs stay ``queued``), then the rest of the calls written by one SQL statement as the calls
leave their runs once executed (one in 20 failed), each with its own payload, one call every
600 ms back from now, the five functions in turn; vacuumed and analyzed. Measured in a child
process (as ``task_pages``, whose timing helpers it uses: Django's test client through the
whole middleware, admin and API stack, with a superuser's session, and ``call_command`` for
the CLI): per page the median and p95 of up to 20 requests after one warm-up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import common
from bench.scenario_task_pages import ROOT, TARGET_MS

CALLS = 1_000_000
QUICK_CALLS = 100_000
REAL_CALLS = 2_000  # per function, through enqueue_many

SEED_SQL = """
INSERT INTO tasks_app_run
       (id, task_id, trigger, status, attempt, interruptions, scheduled_for, due_at,
        created_at, queued_at, started_at, finished_at, lateness_ms, worker, output,
        truncated, error, result, payload, queue, priority)
SELECT gen_random_uuid(), t.id, 'enqueue',
       CASE WHEN s.g %% 20 = 0 THEN 'failed' ELSE 'completed' END, 1, 0,
       s.at, s.at, s.at, s.at, s.at + interval '3 milliseconds',
       s.at + interval '40 milliseconds', 3.0, 'bench@host', '', false,
       CASE WHEN s.g %% 20 = 0 THEN 'ValueError: failed on purpose' ELSE '' END,
       CASE WHEN s.g %% 20 = 0 THEN NULL ELSE to_jsonb(s.g) END,
       jsonb_build_object('task', t.payload->>'task', 'args', jsonb_build_array(s.g),
                          'kwargs', '{}'::jsonb,
                          'using', jsonb_build_object('priority', 0, 'queue_name', 'default',
                                                      'run_after', NULL)),
       '', NULL
  FROM (SELECT g, now() - g * interval '600 milliseconds' AS at
          FROM generate_series(1, %(n)s) AS g) AS s
  JOIN (SELECT id, payload, row_number() OVER (ORDER BY id) - 1 AS k
          FROM tasks_app_task) AS t ON t.k = s.g %% 5
"""


def run(results_dir: Path, *, quick: bool = False) -> dict[str, Any]:
    calls = QUICK_CALLS if quick else CALLS
    data = _seed(calls)
    out = Path(results_dir) / "enqueued_pages_child.json"
    env = {
        **os.environ,
        "LOG_LEVEL": "WARNING",
        "TASKS_API_RATE_USER": "1000000/minute",  # 20 requests in a row are the point
    }
    args = [sys.executable, "-m", "bench.scenario_enqueued_pages", str(out)]
    subprocess.run(args, cwd=ROOT, env=env, check=True, timeout=3600)
    pages = json.loads(out.read_text())
    out.unlink()
    common.reset_tables()
    over = sorted(name for name, page in pages.items() if page["p95_ms"] > TARGET_MS)
    return {
        "scenario": "enqueued_pages",
        "target_ms": TARGET_MS,
        "calls": calls,
        "data": data,
        "pages": pages,
        "over_target": over,
        "ok": not over and data["tasks"] == 5,
    }


def _seed(calls: int) -> dict[str, Any]:
    from django.db import connection
    from django.db.models import Count

    from bench.enqueue_functions import FUNCTIONS
    from tasks_app.django_tasks import enqueue_many
    from tasks_app.models import Run, Task

    common.reset_tables()
    started = time.perf_counter()
    for function in FUNCTIONS:
        enqueue_many(function, [((i,), {}) for i in range(REAL_CALLS)])
    common.delete_queues(common.QUEUE)
    with connection.cursor() as cur:
        cur.execute(SEED_SQL, {"n": calls - REAL_CALLS * len(FUNCTIONS)})
    common.settle_after_bulk_load()
    common.bench_superuser()
    return {
        "tasks": Task.objects.count(),
        "runs": Run.objects.count(),
        "runs_per_task": dict(
            Run.objects.values_list("task_id").annotate(n=Count("id")).order_by("task_id")
        ),
        "seed_seconds": round(time.perf_counter() - started, 1),
    }


def _child(out: Path) -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.test.utils import override_settings

    from bench.scenario_task_pages import _command, _page, _progress
    from tasks_app.models import Task

    task = Task.objects.order_by("id").first()
    assert task is not None
    admin = "/admin/tasks_app/task/"
    urls = {
        "admin_task_list": admin,
        "admin_task_page": f"{admin}{task.pk}/change/",
        "admin_run_list": "/admin/tasks_app/run/",
        "admin_runs_of_task": f"/admin/tasks_app/run/?q={task.pk}",
        "admin_failed_runs": "/admin/tasks_app/run/?status__exact=failed",
        "admin_overview": "/admin/overview/",
        "api_task_list": "/api/tasks",
        "api_task": f"/api/tasks/{task.pk}",
        "api_runs_of_task": f"/api/tasks/{task.pk}/runs",
        "api_run_list": "/api/runs",
        "metrics": "/metrics",
    }
    plain_static = {
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    }
    pages: dict[str, dict[str, Any]] = {}
    with override_settings(STORAGES=plain_static, ALLOWED_HOSTS=["testserver"]):
        client = Client()
        client.force_login(get_user_model().objects.get(username="bench"))
        for name, url in urls.items():
            pages[name] = _page(client, url)
            _progress(name, pages[name])
    for name, args in {
        "cli_list": ("list",),
        "cli_get": ("get", task.pk),
        "cli_runs": ("runs", task.pk),
    }.items():
        pages[name] = _command(*args)
        _progress(name, pages[name])
    out.write_text(json.dumps(pages, indent=2))


if __name__ == "__main__":
    _child(Path(sys.argv[1]))
