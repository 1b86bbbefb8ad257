"""History scenario: pages and retention with 20,000,000 finished runs over 90 days.

``python -m bench history`` (``--quick``: 1,000,000 runs and shorter windows;
``HISTORY_RUNS=N`` another size). In its own
database (``BENCH_HISTORY_DATABASE_URL``, default ``.../tasks_history_bench``, dropped at the
end unless ``HISTORY_KEEP_DB=1``), in a child process pointed at it:

1. **Anchor pages**: 100,000 finished runs over 90 days for 1,000 tasks (``history_load``,
   Postgres ``COPY``) in a database of their own (the history database's name + ``_anchor``),
   then the admin overview, run list, run list filtered to failed, task page,
   ``GET /api/runs``, ``/metrics`` and ``/api/health`` through Django's test client: median
   and p95 of ``ITERATIONS`` requests each.
2. **History pages**: the same pages with 20,000,000 runs (the first ``/metrics`` scrape,
   which tallies every finished run once, is timed apart). Target: p95 ≤ 300 ms each.
   ``HISTORY_REUSE=1`` keeps a history database that already holds exactly that many runs
   (loaded by ``python -m bench.history_load`` or kept by ``HISTORY_KEEP_DB=1``) instead of
   loading it again.
3. **Partitions or batched deletes** (``history_partitions``, ``HISTORY_PARTITIONS=0`` skips
   it): one day's retention by batched ``DELETE`` against ``DROP`` of a day partition, and the
   run-id lookup of the hot path on both tables.
4. **Retention under load**: 200 interval tasks firing every second (200 runs/s through a
   real ``celery beat`` and ``celery worker``), first with retention off (the anchor), then
   with ``TASKS_RUN_RETENTION_DAYS=45`` so that the leading beat's retention thread deletes
   the ~10,000,000 runs older than 45 days: deletion rate (from ``pg_stat_user_tables``) and
   the start lateness (``started_at - due_at``) p50/p99 of the runs due in each window.
   The loaded window lasts at most ``HISTORY_RETENTION_WINDOW_S`` (300 s; quick 60 s); then
   the load stops and ``runs_prune`` finishes what is left (``HISTORY_FINISH=0`` skips it), to
   show the table reaching its bound.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgres://root@127.0.0.1:5432/tasks_history_bench"
TASKS = 1_000
ANCHOR_RUNS = 100_000
HISTORY_RUNS = 20_000_000
QUICK_RUNS = 1_000_000
DAYS = 90
ITERATIONS = 20
TARGET_MS = 300.0
LOAD_TASKS = 200  # interval tasks firing every second: 200 runs/s
RETENTION_DAYS = 45
LOAD_IDS = [f"load-{i:03d}" for i in range(LOAD_TASKS)]


def run(results_dir: Path, *, quick: bool = False) -> dict[str, Any]:
    out = Path(results_dir) / "history.json"
    url = os.environ.get("BENCH_HISTORY_DATABASE_URL", DEFAULT_URL)
    base, _, query = url.partition("?")
    anchor_url = base + "_anchor" + (f"?{query}" if query else "")
    try:
        anchor = _phase("anchor", anchor_url, out, quick)
        result = {**anchor, **_phase("history", url, out, quick)}
    finally:
        if os.environ.get("HISTORY_KEEP_DB") != "1":
            _drop_database(url)
        _drop_database(anchor_url)
    result["ratios_p95"] = {
        page: round(result["history"][page]["p95_ms"] / result["anchor"][page]["p95_ms"], 2)
        for page in result["history"]
    }
    out.write_text(json.dumps(result, indent=2, default=str))
    return result


def _phase(phase: str, url: str, out: Path, quick: bool) -> dict[str, Any]:
    """One phase in a child process pointed at ``url`` (Django is set up once per process)."""
    env = {**os.environ, "DATABASE_URL": url, "LOG_LEVEL": "WARNING"}
    args = [sys.executable, "-m", "bench.history", phase, str(out)]
    subprocess.run(
        args + (["--quick"] if quick else []), cwd=ROOT, env=env, check=True, timeout=4 * 3600
    )
    return json.loads(out.read_text())


def _admin_url(url: str) -> tuple[str, str]:
    return url.rsplit("/", 1)[0] + "/postgres", url.rsplit("/", 1)[1].split("?")[0]


def _ensure_database(url: str) -> None:
    import psycopg
    from psycopg import sql

    admin, name = _admin_url(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def _drop_database(url: str) -> None:
    import psycopg
    from psycopg import sql

    admin, name = _admin_url(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


# --- child process -------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * (len(values) - 1)))], 1)


def _measure(client: Any, url: str, ok: tuple[int, ...] = (200,)) -> dict[str, Any]:
    client.get(url)  # warm: connection, templates, caches
    times: list[float] = []
    for _ in range(ITERATIONS):
        start = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - start) * 1000)
        if response.status_code not in ok:
            raise RuntimeError(f"{url} answered {response.status_code}")
    return {
        "url": url,
        "median_ms": round(statistics.median(times), 1),
        "p95_ms": _pct(times, 0.95),
        "max_ms": round(max(times), 1),
        "status": response.status_code,
    }


def _pages(client: Any) -> dict[str, Any]:
    return {
        "overview": _measure(client, "/admin/overview/"),
        "run_list": _measure(client, "/admin/tasks_app/run/"),
        "run_list_failed": _measure(client, "/admin/tasks_app/run/?status__exact=failed"),
        "task_page": _measure(client, "/admin/tasks_app/task/hist-00003/change/"),
        "api_runs": _measure(client, "/api/runs"),
        "api_runs_failed": _measure(client, "/api/runs?status=failed"),
        "metrics": _measure(client, "/metrics"),
        # No worker runs during the page phases: health answers 503 after the worker ping's
        # timeout (TASKS_HEALTH_WORKER_TIMEOUT_SECONDS, 0.1 here); the time is what counts.
        "health": _measure(client, "/api/health", ok=(200, 503)),
    }


def _load(runs: int) -> dict[str, float]:
    import psycopg

    from bench.history_load import load

    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        return load(conn, tasks=TASKS, runs=runs, days=DAYS)


def _deleted_so_far() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT n_tup_del FROM pg_stat_user_tables WHERE relname = 'tasks_app_run'")
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def _lateness(since: Any, until: Any) -> dict[str, Any]:
    from tasks_app.models import Run

    load = Run.objects.filter(task_id__in=LOAD_IDS, due_at__gte=since, due_at__lt=until)
    values = list(load.filter(lateness_ms__isnull=False).values_list("lateness_ms", flat=True))
    due = load.count()
    return {
        "runs_due": due,
        "runs_started": len(values),
        "runs_per_s": round(len(values) / max((until - since).total_seconds(), 1), 1),
        "p50_ms": _pct(values, 0.5),
        "p99_ms": _pct(values, 0.99),
        "max_ms": round(max(values), 1) if values else None,
    }


def _retention(quick: bool) -> dict[str, Any]:
    from django.utils import timezone

    from bench import common
    from tasks_app import services
    from tasks_app.models import Run, Task

    window = float(os.environ.get("HISTORY_RETENTION_WINDOW_S", "60" if quick else "300"))
    baseline_s = 30.0 if quick else 90.0
    for task in Task.objects.filter(pk__in=LOAD_IDS):  # a previous attempt's
        services.task_delete(task=task)
    for task_id in LOAD_IDS:
        services.task_create(
            id=task_id,
            action="noop",
            schedule_type="interval",
            interval_seconds=1,
            queue=common.QUEUE,
        )
    cutoff = timezone.now() - timedelta(days=RETENTION_DAYS)
    expired_before = Run.objects.filter(due_at__lt=cutoff).count()
    off = {"TASKS_RUN_RETENTION_DAYS": "0", "TASKS_FAILED_RUN_RETENTION_DAYS": "0"}
    on = {
        "TASKS_RUN_RETENTION_DAYS": str(RETENTION_DAYS),
        "TASKS_FAILED_RUN_RETENTION_DAYS": str(RETENTION_DAYS),
    }
    out: dict[str, Any] = {"expired_before": expired_before, "load_tasks": LOAD_TASKS}
    with common.processes() as procs:
        procs.append(common.start_worker(concurrency=4))
        beat = common.start_beat(scheduler="tasks_app.beat.scheduler:TaskScheduler", **off)
        procs.append(beat)
        time.sleep(15)  # the load settles (workers warm, beat steady)
        start = timezone.now()
        time.sleep(baseline_s)
        out["without_deletion"] = _lateness(start, timezone.now())
        beat.stop()
        beat = common.start_beat(scheduler="tasks_app.beat.scheduler:TaskScheduler", **on)
        procs.append(beat)
        deleted0, start, clock = _deleted_so_far(), timezone.now(), time.monotonic()
        samples = []
        while time.monotonic() - clock < window:
            time.sleep(5)
            samples.append((round(time.monotonic() - clock, 1), _deleted_so_far() - deleted0))
            if Run.objects.filter(due_at__lt=cutoff).exists() is False:
                break
        elapsed = time.monotonic() - clock
        end = timezone.now()
        deleted = _deleted_so_far() - deleted0
        out["during_deletion"] = _lateness(start, end)
        out["deletion"] = {
            "window_s": round(elapsed, 1),
            "deleted": deleted,
            "rows_per_s": round(deleted / elapsed) if elapsed else None,
            "samples": samples,
        }
    base = out["without_deletion"]["p99_ms"]
    during = out["during_deletion"]["p99_ms"]
    out["p99_ratio_during_to_without"] = round(during / base, 2) if base and during else None
    if os.environ.get("HISTORY_FINISH", "1") == "1":
        from django.test.utils import override_settings

        with override_settings(
            TASKS_RUN_RETENTION_DAYS=RETENTION_DAYS, TASKS_FAILED_RUN_RETENTION_DAYS=RETENTION_DAYS
        ):
            report = services.runs_prune(batch=20_000)
        out["finish_without_load"] = {
            **report.as_dict(),
            "rows_per_s": round(report.runs / report.seconds) if report.seconds else None,
        }
    out["expired_left"] = Run.objects.filter(due_at__lt=cutoff).count()
    out["runs_left"] = Run.objects.count()
    return out


def _child(phase: str, out: Path, quick: bool) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ["TASKS_HEALTH_WORKER_TIMEOUT_SECONDS"] = "0.1"
    _ensure_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import override_settings, setup_test_environment

    from bench import common
    from tasks_app.models import Run

    call_command("migrate", "--noinput", verbosity=0)
    setup_test_environment()
    user = common.bench_superuser()
    plain_static = {
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    }
    runs = (
        ANCHOR_RUNS
        if phase == "anchor"
        else int(os.environ.get("HISTORY_RUNS") or (QUICK_RUNS if quick else HISTORY_RUNS))
    )
    result: dict[str, Any] = {}
    with override_settings(STORAGES=plain_static):
        client = Client()
        client.force_login(user)
        reuse = os.environ.get("HISTORY_REUSE") == "1" and Run.objects.count() == runs
        result[f"{phase}_load"] = {"reused": True} if reuse else _load(runs)
        if phase == "history":
            start = time.perf_counter()
            client.get("/metrics")
            result["metrics_first_scrape_ms"] = round((time.perf_counter() - start) * 1000, 1)
        result[phase] = _pages(client)
        print(json.dumps(result[phase]), flush=True)
    if phase == "anchor":
        out.write_text(json.dumps(result, indent=2, default=str))
        return
    result.update(scenario="history", target_ms=TARGET_MS, tasks=TASKS, runs=runs)
    result["pages_ok"] = all(p["p95_ms"] <= TARGET_MS for p in result["history"].values())
    out.write_text(json.dumps(result, indent=2, default=str))  # the pages, if a later step fails
    if os.environ.get("HISTORY_PARTITIONS", "1") == "1":
        import psycopg

        from bench.history_partitions import measure

        with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
            result["partitions"] = measure(conn)
        print(json.dumps(result["partitions"]), flush=True)
    common.delete_queues(common.QUEUE)
    result["retention"] = _retention(quick)
    out.write_text(json.dumps(result, indent=2, default=str))
    print(json.dumps(result, indent=2, default=str), flush=True)


if __name__ == "__main__":
    _child(sys.argv[1], Path(sys.argv[2]), "--quick" in sys.argv[3:])
