"""Admin pages under load: the overview and a task page with 100,000 runs and 1,000 tasks.

``run(results_dir)`` returns (and writes to ``results_dir/admin_pages.json``) the median and
p95 response time in ms and the SQL query count of each page. Target: overview and task page
under 300 ms.

The data lives in its own database (``BENCH_ADMIN_DATABASE_URL``, default
``postgres://root@127.0.0.1:5432/tasks_bench_admin``), created and seeded on first use
(kept for later runs; pass ``reseed=True`` to rebuild). The measurement runs in a child
Python process so that it can point Django at that database whatever the caller has set up.
Requests go through Django's test client (the full middleware and admin stack, no network).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench import common

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgres://root@127.0.0.1:5432/tasks_bench_admin"
TASKS = 1_000
RUNS = 100_000
SPREAD_HOURS = 72  # runs are due over the last three days, denser in the last hour
ITERATIONS = 30
TARGET_MS = 300.0


def run(results_dir: Path, *, reseed: bool = False) -> dict[str, Any]:
    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    out = results_dir / "admin_pages.json"
    env = {
        **os.environ,
        "DATABASE_URL": os.environ.get("BENCH_ADMIN_DATABASE_URL", DEFAULT_URL),
        "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY", "bench-not-secret"),
        "DJANGO_SECURE_SSL": "0",
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "LOG_LEVEL": "WARNING",
    }
    env.setdefault("CELERY_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")
    args = [sys.executable, "-m", "bench.scenario_admin_pages", str(out)]
    if reseed:
        args.append("--reseed")
    subprocess.run(args, cwd=ROOT, env=env, check=True, timeout=1800)
    return json.loads(out.read_text())


# --- child process -------------------------------------------------------------------------


def _ensure_database(url: str) -> None:
    import psycopg
    from psycopg import sql

    name = url.rsplit("/", 1)[1].split("?")[0]
    admin_url = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def _seed(reseed: bool) -> dict[str, int]:
    from django.db import connection
    from django.utils import timezone

    from tasks_app.models import Run, RunStatus, Task, TaskState, TaskStatus, allow_status_writes

    if reseed:
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE tasks_app_run, tasks_app_task CASCADE")
    if Task.objects.count() >= TASKS and Run.objects.count() >= RUNS:
        return {"tasks": Task.objects.count(), "runs": Run.objects.count(), "seeded_now": 0}
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE tasks_app_run, tasks_app_task CASCADE")
    rng = random.Random(42)
    now = timezone.now()
    tasks = []
    for i in range(TASKS):
        kind = ("cron", "interval", "none")[i % 3]
        tasks.append(
            Task(
                id=f"bench-{i:04d}",
                name=f"Bench task {i}",
                action=("noop", "echo", "sleep")[i % 3],
                payload={"message": "x"} if i % 3 == 1 else ({"seconds": 0} if i % 3 == 2 else {}),
                schedule_type=kind,
                cron="*/5 * * * *" if kind == "cron" else "",
                timezone="Europe/Paris" if kind == "cron" else "UTC",
                interval_seconds=300 if kind == "interval" else None,
            )
        )
    Task.objects.bulk_create(tasks, batch_size=1000)
    states = {s.task_id: s for s in TaskState.objects.all()}
    for i, task in enumerate(tasks):
        state = states[task.id]
        failing, paused = i % 40 == 1, i % 50 == 0
        state.status = (
            TaskStatus.PAUSED if paused else TaskStatus.FAILED if failing else TaskStatus.PENDING
        )
        state.consecutive_failures = 3 if failing else 0
        if task.schedule_type != "none" and not paused:
            state.next_run_at = now + timedelta(minutes=rng.randint(1, 300))
        if paused:
            state.paused_at, state.paused_by, state.pause_note = now, "bench", "maintenance window"
        if i % 100 == 7:
            state.alarm_since = now - timedelta(minutes=10)
    fields = ["status", "consecutive_failures", "next_run_at", "paused_at", "paused_by"]
    with allow_status_writes():  # seeding: tasks in the states a busy site shows
        TaskState.objects.bulk_update(
            states.values(), [*fields, "pause_note", "alarm_since"], batch_size=1000
        )
    statuses = (
        [RunStatus.COMPLETED] * 90
        + [RunStatus.FAILED] * 6
        + [RunStatus.RETRYING] * 2
        + [RunStatus.EXPIRED, RunStatus.CANCELLED]
    )
    batch: list[Run] = []
    for n in range(RUNS):
        # 5% of the runs in the last hour, the rest over three days.
        minutes = rng.uniform(0, 60) if n % 20 == 0 else rng.uniform(0, SPREAD_HOURS * 60)
        due = now - timedelta(minutes=minutes)
        late = rng.lognormvariate(2.5, 1.0)
        started = due + timedelta(milliseconds=late)
        task = tasks[n % TASKS]
        batch.append(
            Run(
                task_id=task.id,
                trigger="schedule" if task.schedule_type != "none" else "api",
                status=rng.choice(statuses),
                scheduled_for=due,
                due_at=due,
                queued_at=due,
                started_at=started,
                finished_at=started + timedelta(milliseconds=rng.uniform(5, 500)),
                lateness_ms=round(late, 3),
                worker="bench@host",
                output="ok",
            )
        )
        if len(batch) == 10_000:
            Run.objects.bulk_create(batch)
            batch = []
    if batch:
        Run.objects.bulk_create(batch)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE tasks_app_run; ANALYZE tasks_app_task")
    common.bench_superuser()
    return {"tasks": Task.objects.count(), "runs": Run.objects.count(), "seeded_now": 1}


def _measure(client: Any, url: str) -> dict[str, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.get(url)  # warm: connection, template cache, health cache
    times: list[float] = []
    queries = 0
    for _ in range(ITERATIONS):
        with CaptureQueriesContext(connection) as captured:
            start = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - start) * 1000)
        if response.status_code != 200:
            raise RuntimeError(f"{url} answered {response.status_code}")
        queries = len(captured.captured_queries)
    times.sort()
    return {
        "url": url,
        "median_ms": round(statistics.median(times), 1),
        "p95_ms": round(times[int(0.95 * (len(times) - 1))], 1),
        "max_ms": round(times[-1], 1),
        "queries": queries,
        "iterations": ITERATIONS,
    }


def _child(out: Path, reseed: bool) -> None:
    import django

    _ensure_database(os.environ["DATABASE_URL"])
    django.setup()
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import override_settings, setup_test_environment

    call_command("migrate", "--noinput", verbosity=0)
    started = time.perf_counter()
    seeded = _seed(reseed)
    seed_s = round(time.perf_counter() - started, 1)
    setup_test_environment()
    from django.contrib.auth import get_user_model

    from tasks_app.models import Task

    plain_static = {
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    }
    with override_settings(STORAGES=plain_static):
        client = Client()
        client.force_login(get_user_model().objects.get(username="bench"))
        client.get("/admin/overview/health/")  # fill the health cache as a first visitor would
        task = Task.objects.filter(schedule_type="cron").order_by("id").first()
        assert task is not None
        pages = {
            "overview": _measure(client, "/admin/overview/"),
            "task_page": _measure(client, f"/admin/tasks_app/task/{task.pk}/change/"),
            "run_list": _measure(client, "/admin/tasks_app/run/"),
            "run_list_failed": _measure(client, "/admin/tasks_app/run/?status__exact=failed"),
            "task_list": _measure(client, "/admin/tasks_app/task/"),
            "metrics": _measure(client, "/metrics"),
        }
    result = {
        "scenario": "admin_pages",
        "data": {
            **seeded,
            "seed_seconds": seed_s,
            "runs_per_task": seeded["runs"] // max(seeded["tasks"], 1),
        },
        "target_ms": TARGET_MS,
        "pages": pages,
        "ok": all(pages[p]["p95_ms"] < TARGET_MS for p in ("overview", "task_page")),
    }
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    _child(Path(sys.argv[1]), "--reseed" in sys.argv[2:])
