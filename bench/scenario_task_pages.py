"""Task pages at 1,000,000 tasks: the admin task list (search, filters), a task's page, the
API's task list (filters, search) and ``manage.py tasks list``, beside the same pages at
1,000 tasks measured in the same run.

``run(results_dir, quick=False)`` writes ``results_dir/task_pages.json``: per page the
median and p95 response time in ms, the SQL statements one request sends and the size of
the answer, at both sizes, and the ratio of the large p95 to the anchor's. Target: every
page's p95 at most 300 ms at 1,000,000 tasks (``--quick``: 100,000).

Each size has its own database (``<BENCH_DB>_pages_<tasks>``, e.g.
``tasks_bench_pages_1000000``; ``BENCH_TASK_PAGES_DATABASE_URL`` names another server),
created, migrated and seeded on first use and kept for later runs (the seed is SQL:
``INSERT ... SELECT generate_series``, about a minute for 1,000,000 tasks; a database whose
seed marker is older is seeded again). The mix: six actions; schedules on demand, once,
interval and cron (five expressions in six time zones), each recurring task with its
django-celery-beat ``PeriodicTask`` on shared ``IntervalSchedule`` / ``CrontabSchedule``
rows as the services write them; task states with statuses and next runs; some paused
tasks; about 10,000 runs over 200 tasks. Every measurement runs in a child process that points
Django at that database; requests go through Django's test client (the full middleware,
admin and API stack, no network; without the test environment's template instrumentation,
which production does not have) with a superuser's session; the CLI runs in-process with
``call_command``. A page's size (bytes, ``<option`` elements) is recorded beside its time:
a page that listed every task would show it.
"""

from __future__ import annotations

import io
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bench import common

ROOT = Path(__file__).resolve().parent.parent
TASKS = 1_000_000
QUICK_TASKS = 100_000
ANCHOR_TASKS = 1_000
RUN_TASKS = 200  # tasks with a history
RUNS_PER_TASK = 50
ITERATIONS = 20
PAGE_BUDGET_S = 20.0  # a page stops early (at 5 requests or more) once it has taken this long
TARGET_MS = 300.0
SEED_VERSION = 1

NAMES = (
    "Nightly report",
    "Invoice reminder",
    "Cache warmup",
    "Webhook delivery",
    "Backup check",
    "Newsletter send",
    "Data export",
    "Cleanup sweep",
    "Health probe",
    "Digest email",
    "Quota reset",
    "Index refresh",
)
# (action, share in 20ths, payload)
ACTIONS = (
    ("http", 6, {"url": "https://hooks.example.com/notify", "method": "POST"}),
    ("email", 4, {"to": ["ops@example.com"], "subject": "Report", "body": "See attached."}),
    ("echo", 3, {"message": "hello"}),
    ("noop", 3, {}),
    ("sleep", 2, {"seconds": 1}),
    ("fail", 2, {"message": "failed on purpose"}),
)
INTERVALS = (60, 300, 900, 3600, 86400)
CRONS = ("*/5 * * * *", "0 9 * * mon-fri", "30 2 * * *", "0 */6 * * *", "15 14 1 * *")
ZONES = (
    "UTC",
    "Europe/Paris",
    "America/New_York",
    "Asia/Tokyo",
    "Australia/Sydney",
    "America/Sao_Paulo",
)
# A task the pages open (cron, with runs), and the search terms: a fragment of ids (a few
# hundred matches at 1,000,000 tasks, one at 1,000) and a word of names (one task in 12).
PAGE_TASK = 14  # i % 20 == 14: cron
ID_FRAGMENT = "00737"
NAME_WORD = "newsletter"


def database_url(tasks: int) -> str:
    base = os.environ.get("BENCH_TASK_PAGES_DATABASE_URL") or os.environ.get(
        "DATABASE_URL", "postgres://root@127.0.0.1:5432/tasks_bench"
    )
    parts = urlsplit(base)
    prefix = os.environ.get("BENCH_DB", "tasks_bench")
    return urlunsplit(parts._replace(path=f"/{prefix}_pages_{tasks}"))


def run(results_dir: Path, *, quick: bool = False) -> dict[str, Any]:
    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    large = QUICK_TASKS if quick else TASKS
    phases = {}
    for phase, tasks in (("anchor", ANCHOR_TASKS), ("large", large)):
        out = results_dir / f"task_pages_{phase}.json"
        env = {
            **os.environ,
            "DATABASE_URL": database_url(tasks),
            "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY", "bench-not-secret"),
            "DJANGO_SECURE_SSL": "0",
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "LOG_LEVEL": "WARNING",
            "TASKS_API_RATE_USER": "1000000/minute",  # 400 requests in a row are the point
        }
        env.setdefault("CELERY_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")
        args = [sys.executable, "-m", "bench.scenario_task_pages", str(out), str(tasks)]
        subprocess.run(args, cwd=ROOT, env=env, check=True, timeout=3600)
        phases[phase] = json.loads(out.read_text())
        out.unlink()
    anchor, big = phases["anchor"]["pages"], phases["large"]["pages"]
    pages = {
        name: {
            "large": big[name],
            "anchor": anchor[name],
            "p95_ratio": round(big[name]["p95_ms"] / max(anchor[name]["p95_ms"], 0.1), 2),
        }
        for name in big
    }
    over = sorted(name for name, page in big.items() if page["p95_ms"] > TARGET_MS)
    result = {
        "scenario": "task_pages",
        "target_ms": TARGET_MS,
        "tasks": large,
        "anchor_tasks": ANCHOR_TASKS,
        "data": {"large": phases["large"]["data"], "anchor": phases["anchor"]["data"]},
        "pages": pages,
        "over_target": over,
        "ok": not over,
    }
    (results_dir / "task_pages.json").write_text(json.dumps(result, indent=2))
    return result


# --- child process: seed -------------------------------------------------------------------


def _ensure_database(url: str) -> None:
    import psycopg
    from psycopg import sql

    name = urlsplit(url).path.lstrip("/")
    admin_url = urlunsplit(urlsplit(url)._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def _seeded(cursor: Any, tasks: int) -> bool:
    cursor.execute(
        "CREATE TABLE IF NOT EXISTS bench_task_pages_seed (version int, tasks int, at timestamptz)"
    )
    cursor.execute("SELECT version, tasks FROM bench_task_pages_seed")
    return cursor.fetchone() == (SEED_VERSION, tasks)


def _schedule_ids() -> tuple[list[int], list[int]]:
    """The beat schedules the recurring tasks share, as the services create them: interval
    ids in ``INTERVALS`` order, crontab ids by ``CRONS`` then ``ZONES``."""
    from django_celery_beat.models import CrontabSchedule, IntervalSchedule

    from tasks_app.timing import scheduling

    intervals = [
        IntervalSchedule.objects.get_or_create(every=s, period=IntervalSchedule.SECONDS)[0].pk
        for s in INTERVALS
    ]
    crontabs = []
    for expr in CRONS:
        minute, hour, dom, month, dow = scheduling.expand_macro(
            scheduling.parse_cron(expr).text
        ).split()
        for zone in ZONES:
            crontabs.append(
                CrontabSchedule.objects.get_or_create(
                    minute=minute,
                    hour=hour,
                    day_of_month=dom,
                    month_of_year=month,
                    day_of_week=dow,
                    timezone=zone,
                )[0].pk
            )
    return intervals, crontabs


SEED_SQL = """
SET CONSTRAINTS ALL IMMEDIATE;
CREATE TEMP TABLE seed AS
SELECT i,
       'task-' || lpad(i::text, 7, '0') AS id,
       CASE WHEN i %% 20 < 6 THEN 'none' WHEN i %% 20 < 8 THEN 'once'
            WHEN i %% 20 < 14 THEN 'interval' ELSE 'cron' END AS kind,
       (%(actions)s::text[])[1 + (i / 7) %% 20] AS action,
       i %% 37 = 5 AS paused
  FROM generate_series(0, %(n)s - 1) AS i;

INSERT INTO django_celery_beat_periodictask
       (id, name, task, args, kwargs, queue, exchange, routing_key, expires, enabled,
        last_run_at, total_run_count, date_changed, description, crontab_id, interval_id,
        solar_id, one_off, start_time, priority, headers, clocked_id, expire_seconds)
SELECT i + 1, 'task:' || id, 'tasks_app.execute_task', '[]',
       json_build_object('task_id', id)::text, %(queue)s, NULL, NULL, NULL, NOT paused,
       NULL, 0, now(), 'Owned by task ' || id || '; edit the task, not this entry.',
       CASE WHEN kind = 'cron' THEN (%(crontabs)s::int[])[1 + i %% %(n_crontabs)s] END,
       CASE WHEN kind = 'interval' THEN (%(intervals)s::int[])[1 + i %% %(n_intervals)s] END,
       NULL, false, NULL, 5, '{}', NULL, NULL
  FROM seed WHERE kind IN ('interval', 'cron');
SELECT setval(pg_get_serial_sequence('django_celery_beat_periodictask', 'id'),
              (SELECT coalesce(max(id), 1) FROM django_celery_beat_periodictask));

ALTER TABLE tasks_app_task DISABLE TRIGGER tasks_app_task_state;
INSERT INTO tasks_app_task
       (id, name, description, action, payload, queue, priority, max_retries,
        retry_backoff_seconds, timeout_seconds, expires_after_seconds, schedule_type, run_at,
        interval_seconds, cron, timezone, start_at, end_at, max_runs, jitter_seconds,
        overlap_policy, catchup, catchup_window_seconds, pause_after_failures,
        alert_after_seconds, created_at, updated_at, periodic_task_id, keep_runs_count,
        keep_runs_days, declared_in)
SELECT id, (%(names)s::text[])[1 + i %% %(n_names)s] || ' ' || i,
       CASE WHEN i %% 4 = 0 THEN 'Owned by the billing team; see the runbook.' ELSE '' END,
       action, (%(payloads)s::jsonb)->action, %(queue)s, i %% 10, i %% 4, 10,
       CASE WHEN i %% 3 = 0 THEN 300 END, NULL, kind,
       CASE WHEN kind = 'once' THEN %(now)s::timestamptz + (i %% 10000) * interval '1 minute' END,
       CASE WHEN kind = 'interval' THEN (%(interval_seconds)s::int[])[1 + i %% %(n_intervals)s] END,
       CASE WHEN kind = 'cron' THEN (%(cron_exprs)s::text[])[1 + (i %% %(n_crontabs)s) / %(n_zones)s] ELSE '' END,
       CASE WHEN kind = 'cron' THEN (%(zones)s::text[])[1 + (i %% %(n_crontabs)s) %% %(n_zones)s] ELSE 'UTC' END,
       NULL, NULL, NULL, 0,
       (ARRAY['allow', 'skip', 'buffer_one'])[1 + i %% 3], 'skip', 3600, NULL, NULL,
       %(now)s::timestamptz - (%(n)s - i) * interval '1 second',
       %(now)s::timestamptz - (%(n)s - i) * interval '1 second',
       CASE WHEN kind IN ('interval', 'cron') THEN i + 1 END, NULL, NULL, ''
  FROM seed;
ALTER TABLE tasks_app_task ENABLE TRIGGER tasks_app_task_state;

INSERT INTO tasks_app_taskstate (task_id, status, next_run_at, consecutive_failures, fire_count,
                                 paused_at, paused_by, pause_note)
SELECT id,
       CASE WHEN paused THEN 'paused'
            WHEN i %% 100 < 3 THEN 'failed'
            WHEN i %% 100 = 3 THEN 'running'
            WHEN i %% 100 = 4 THEN 'cancelled'
            WHEN kind = 'none' THEN (ARRAY['created', 'completed'])[1 + i %% 2]
            WHEN kind = 'once' THEN 'pending'
            ELSE (ARRAY['pending', 'pending', 'completed'])[1 + i %% 3] END,
       CASE WHEN paused THEN NULL
            WHEN kind = 'once' THEN %(now)s::timestamptz + (i %% 10000) * interval '1 minute'
            WHEN kind IN ('interval', 'cron') THEN %(now)s::timestamptz + (i %% 86400) * interval '1 second'
       END,
       CASE WHEN i %% 100 < 3 THEN 1 + i %% 5 ELSE 0 END,
       CASE WHEN kind IN ('interval', 'cron') THEN i %% 500 ELSE 0 END,
       CASE WHEN paused THEN %(now)s::timestamptz END, CASE WHEN paused THEN 'bench' ELSE '' END,
       CASE WHEN paused THEN 'maintenance window' ELSE '' END
  FROM seed;

INSERT INTO tasks_app_run
       (id, task_id, trigger, status, attempt, interruptions, scheduled_for, due_at,
        created_at, queued_at, started_at, finished_at, lateness_ms, worker, output,
        truncated, error, result)
SELECT gen_random_uuid(), s.id, 'schedule',
       CASE WHEN r %% 10 = 0 THEN 'failed' ELSE 'completed' END, 1, 0,
       %(now)s::timestamptz - r * interval '5 minutes', %(now)s::timestamptz - r * interval '5 minutes',
       %(now)s::timestamptz - r * interval '5 minutes', %(now)s::timestamptz - r * interval '5 minutes',
       %(now)s::timestamptz - r * interval '5 minutes' + interval '3 milliseconds',
       %(now)s::timestamptz - r * interval '5 minutes' + interval '120 milliseconds',
       3.0, 'bench@host', 'ok', false,
       CASE WHEN r %% 10 = 0 THEN 'ActionError: failed on purpose' ELSE '' END, NULL
  FROM seed AS s CROSS JOIN generate_series(1, %(runs_per_task)s) AS r
 WHERE s.kind = 'cron' AND s.i < %(run_tasks_below)s;
"""


def _seed(tasks: int) -> dict[str, Any]:
    from django.db import connection, transaction
    from django.utils import timezone

    from tasks_app.models import Run, Task

    with connection.cursor() as cursor:
        if _seeded(cursor, tasks):
            return {"tasks": Task.objects.count(), "runs": Run.objects.count(), "seeded_now": 0}
    started = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE tasks_app_run, tasks_app_task, tasks_app_taskstate, "
            "tasks_app_taskauditentry, django_celery_beat_periodictask, "
            "bench_task_pages_seed CASCADE"
        )
        intervals, crontabs = _schedule_ids()
        shares = [name for name, share, _ in ACTIONS for _ in range(share)]
        assert len(shares) == 20
        run_tasks_below = -(-RUN_TASKS // 6) * 20  # about RUN_TASKS cron tasks (6 in 20)
        params = {
            "n": tasks,
            "now": timezone.now(),
            "queue": "default",
            "actions": shares,
            "payloads": json.dumps({name: payload for name, _, payload in ACTIONS}),
            "names": list(NAMES),
            "n_names": len(NAMES),
            "intervals": intervals,
            "interval_seconds": list(INTERVALS),
            "n_intervals": len(INTERVALS),
            "crontabs": crontabs,
            "cron_exprs": list(CRONS),
            "zones": list(ZONES),
            "n_crontabs": len(crontabs),
            "n_zones": len(ZONES),
            "runs_per_task": RUNS_PER_TASK,
            "run_tasks_below": run_tasks_below,
        }
        from django.conf import settings

        params["queue"] = settings.CELERY_TASK_DEFAULT_QUEUE
        for statement in SEED_SQL.split(";\n"):
            if statement.strip():
                cursor.execute(statement, params)
        cursor.execute(
            "INSERT INTO bench_task_pages_seed VALUES (%s, %s, now())", [SEED_VERSION, tasks]
        )
    with connection.cursor() as cursor:
        cursor.execute(
            "VACUUM ANALYZE tasks_app_task, tasks_app_taskstate, tasks_app_run, "
            "django_celery_beat_periodictask"
        )
    common.bench_superuser()
    return {
        "tasks": Task.objects.count(),
        "runs": Run.objects.count(),
        "seeded_now": 1,
        "seed_seconds": round(time.perf_counter() - started, 1),
    }


# --- child process: measure ----------------------------------------------------------------


def _timed(call: Any) -> dict[str, Any]:
    """``call()`` (returning the answer's text) up to ITERATIONS times after one warm-up."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    body = call()  # warm: connection, templates, caches
    times: list[float] = []
    queries = 0
    began = time.perf_counter()
    while len(times) < ITERATIONS:
        with CaptureQueriesContext(connection) as captured:
            start = time.perf_counter()
            body = call()
            times.append((time.perf_counter() - start) * 1000)
        queries = len(captured.captured_queries)
        if len(times) >= 5 and time.perf_counter() - began > PAGE_BUDGET_S:
            break
    times.sort()
    return {
        "median_ms": round(statistics.median(times), 1),
        "p95_ms": round(times[min(len(times) - 1, round(0.95 * (len(times) - 1)))], 1),
        "max_ms": round(times[-1], 1),
        "queries": queries,
        "iterations": len(times),
        "bytes": len(body),
        "options": body.count("<option"),
    }


def _page(client: Any, url: str) -> dict[str, Any]:
    def call() -> str:
        response = client.get(url)
        if response.status_code != 200:
            raise RuntimeError(f"{url} answered {response.status_code}")
        return response.content.decode()

    return {"url": url, **_timed(call)}


def _command(*args: str) -> dict[str, Any]:
    from django.core.management import call_command

    def call() -> str:
        out = io.StringIO()
        call_command("tasks", *args, stdout=out)
        return out.getvalue()

    return {"command": "manage.py tasks " + " ".join(args), **_timed(call)}


def _pages(client: Any) -> dict[str, dict[str, Any]]:
    """Each page measured in turn (printed as it is done: a slow page takes a while)."""
    from tasks_app.models import Task

    task = Task.objects.get(pk=f"task-{PAGE_TASK:07d}")
    admin = "/admin/tasks_app/task/"
    urls = {
        "admin_list": admin,
        "admin_search_id": f"{admin}?q={ID_FRAGMENT}",
        "admin_search_name": f"{admin}?q={NAME_WORD}",
        "admin_filter_status": f"{admin}?state__status__exact=failed",
        "admin_filter_action": f"{admin}?action=email",
        "admin_filter_schedule": f"{admin}?schedule_type__exact=cron",
        "admin_task_page": f"{admin}{task.pk}/change/",
        "admin_add_form": f"{admin}add/",
        "admin_overview": "/admin/overview/",
        "admin_periodic_list": "/admin/django_celery_beat/periodictask/",
        "admin_periodic_search": f"/admin/django_celery_beat/periodictask/?q={ID_FRAGMENT}",
        "admin_periodic_entry": (
            f"/admin/django_celery_beat/periodictask/{task.periodic_task_id}/change/"
        ),
        "api_list": "/api/tasks",
        "api_status": "/api/tasks?status=failed",
        "api_action": "/api/tasks?action=email",
        "api_schedule_type": "/api/tasks?schedule_type=cron",
        "api_search_id": f"/api/tasks?search={ID_FRAGMENT}",
        "api_search_name": f"/api/tasks?search={NAME_WORD}",
        "api_task": f"/api/tasks/{task.pk}",
        "metrics": "/metrics",
    }
    commands = {
        "cli_list": ("list",),
        "cli_list_json": ("list", "--json"),
        "cli_list_filtered": ("list", "--status", "failed", "--action", "email"),
        "cli_list_search": ("list", "--search", NAME_WORD),
    }
    pages: dict[str, dict[str, Any]] = {}
    for name, url in urls.items():
        pages[name] = _page(client, url)
        _progress(name, pages[name])
    for name, args in commands.items():
        pages[name] = _command(*args)
        _progress(name, pages[name])
    return pages


def _progress(name: str, page: dict[str, Any]) -> None:
    print(
        f"[task_pages] {name}: median {page['median_ms']} ms, p95 {page['p95_ms']} ms, "
        f"{page['queries']} queries",
        flush=True,
    )


def _child(out: Path, tasks: int) -> None:
    import django

    _ensure_database(os.environ["DATABASE_URL"])
    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import override_settings

    call_command("migrate", "--noinput", verbosity=0)
    data = _seed(tasks)
    # No setup_test_environment(): its template instrumentation (a copy of every template
    # context, for a test's assertions) costs a 100-row list page a fifth of its time, and
    # production has none. The test client's host needs allowing instead.
    plain_static = {
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    }
    with override_settings(STORAGES=plain_static, ALLOWED_HOSTS=["testserver"]):
        client = Client()
        client.force_login(get_user_model().objects.get(username="bench"))
        pages = _pages(client)
    result = {"data": data, "pages": pages}
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    _child(Path(sys.argv[1]), int(sys.argv[2]))
