"""What every scenario shares: its own database and vhost, processes, percentiles, cleanup.

The runner points the whole bench at a database named ``tasks_bench`` (migrated here) and a
RabbitMQ vhost ``tasks_bench`` (created with ``rabbitmqctl`` and deleted afterwards), so
nothing touches the database, queues or delayed-delivery exchanges of anyone else.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
LOG_DIR = Path(tempfile.gettempdir()) / "tasks-bench-logs"  # process logs, outside the tree
# Overridable so that two people benchmarking on one machine do not share a database/vhost.
BENCH_DB = os.environ.get("BENCH_DB", "tasks_bench")
BENCH_VHOST = os.environ.get("BENCH_VHOST", "tasks_bench")
QUEUE = "bench-runs"


def configure_environment() -> dict[str, str]:
    """Point this process (and every child) at the bench database, vhost and Redis db."""
    db = urlsplit(os.environ.get("DATABASE_URL") or "postgres://root@127.0.0.1:5432/tasks")
    broker = urlsplit(os.environ.get("CELERY_BROKER_URL") or "amqp://guest:guest@127.0.0.1:5672//")
    vhost = BENCH_VHOST if _make_vhost() else ""
    env = {
        "DATABASE_URL": urlunsplit(db._replace(path=f"/{BENCH_DB}")),
        "CELERY_BROKER_URL": urlunsplit(broker._replace(path=f"/{vhost}")),
        "REDIS_URL": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/6"),
        "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY") or "bench-not-secret",
        "DJANGO_SECURE_SSL": "0",
        "TASKS_DEFAULT_QUEUE": QUEUE,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "PYTHONUNBUFFERED": "1",
    }
    os.environ.update(env)
    return env


def _make_vhost() -> bool:
    if not shutil.which("rabbitmqctl"):
        return False
    try:
        subprocess.run(["rabbitmqctl", "add_vhost", BENCH_VHOST], capture_output=True, timeout=60)
        done = subprocess.run(
            ["rabbitmqctl", "set_permissions", "-p", BENCH_VHOST, "guest", ".*", ".*", ".*"],
            capture_output=True,
            timeout=60,
        )
        return done.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def drop_vhost() -> None:
    if shutil.which("rabbitmqctl"):
        subprocess.run(
            ["rabbitmqctl", "delete_vhost", BENCH_VHOST], capture_output=True, timeout=120
        )


def create_database() -> None:
    """Create ``tasks_bench`` if needed and migrate it."""
    import psycopg

    url = urlsplit(os.environ["DATABASE_URL"])
    admin = urlunsplit(url._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (BENCH_DB,)
        ).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{BENCH_DB}"')
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)


def reset_tables() -> None:
    """Empty the tables a scenario writes (runs, tasks, beat entries, results)."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            "TRUNCATE tasks_app_run, tasks_app_task, tasks_app_taskauditentry, "
            "django_celery_beat_periodictask, django_celery_beat_intervalschedule, "
            "django_celery_results_taskresult CASCADE"
        )


def vacuum(*tables: str) -> None:
    from django.db import connection

    with connection.cursor() as cur:
        for table in tables:
            cur.execute(f"ANALYZE {table}")


def machine() -> dict[str, Any]:
    import psutil

    def version(cmd: list[str]) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()[
                -80:
            ]
        except (OSError, subprocess.TimeoutExpired):
            return ""

    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "postgres": version(["psql", "-tAc", "SHOW server_version", os.environ["DATABASE_URL"]]),
        "rabbitmq": version(["rabbitmqctl", "version"]),
    }


def percentiles(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "p50": None, "p90": None, "p99": None, "max": None, "min": None}
    ordered = sorted(values)

    def pick(q: float) -> float:
        return round(ordered[min(int(q * len(ordered)), len(ordered) - 1)], 3)

    return {
        "n": len(ordered),
        "min": round(ordered[0], 3),
        "p50": pick(0.5),
        "p90": pick(0.9),
        "p99": pick(0.99),
        "max": round(ordered[-1], 3),
        "mean": round(statistics.fmean(ordered), 3),
    }


def ratio(ours: float | None, anchor: float | None) -> float | None:
    if ours is None or anchor in (None, 0):
        return None
    return round(ours / anchor, 3)  # type: ignore[operator]


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float = 60) -> None:
        wait_until(
            lambda: text in self.log() or self.popen.poll() is not None,
            timeout=timeout,
            what=f"{self.name}: {text!r}",
        )
        if text not in self.log():
            raise RuntimeError(f"{self.name} exited early:\n{self.log()[-3000:]}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, sig)
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(10)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def rss_mb(self) -> float:
        """Resident memory of the process and its children (prefork pool), in MiB."""
        import psutil

        try:
            proc = psutil.Process(self.popen.pid)
            procs = [proc, *proc.children(recursive=True)]
            return round(sum(p.memory_info().rss for p in procs) / 2**20, 1)
        except psutil.Error:
            return 0.0


def spawn(name: str, args: list[str], *, cwd: Path = ROOT, **env: str) -> Proc:
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log_path = LOG_DIR / f"{name}-{time.time_ns()}.log"
    handle = log_path.open("wb")
    popen = subprocess.Popen(
        args,
        cwd=cwd,
        env={**os.environ, **env},
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return Proc(name, popen, log_path)


def celery(app: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", app, *args]


_installed: Any = None


def installed_project() -> Any:
    """A project laid out by docs/install.md, from the wheel (``tests.installed``), built
    once per benchmark run: the shape a team runs, where every figure of ours is measured."""
    global _installed
    if _installed is None:
        from tests import installed

        _installed = installed.build(Path(tempfile.mkdtemp(prefix="bench-installed-")))
    return _installed


def start_worker(
    *,
    app: str = "project",
    queue: str = QUEUE,
    concurrency: int = 2,
    name: str = "bench-worker",
    shape: str = "demo",
    **env: str,
) -> Proc:
    """A worker of ``app`` (``shape="installed"``: of the installed project, ``app`` unused)."""
    if shape == "installed":
        app, cwd, env = _shape(shape, env)
    else:
        cwd = ROOT
    proc = spawn(
        name,
        celery(
            app,
            "worker",
            "-l",
            "info",
            "--pool",
            "prefork",
            "--concurrency",
            str(concurrency),
            "-Q",
            queue,
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-n",
            f"{name}-{time.time_ns()}@%h",
            # Diagnostic instants of every run in the log (bench/probe.py), on demand only.
            *(["--include", "bench.probe"] if os.environ.get("BENCH_PROBE") == "1" else []),
        ),
        cwd=cwd,
        **env,
    )
    proc.wait_for("ready.", timeout=120)
    return proc


def _shape(shape: str, env: dict[str, str]) -> tuple[str, Path, dict[str, str]]:
    """The Celery app, folder and environment of a process of ``shape``."""
    if shape != "installed":
        return "project", ROOT, env
    project = installed_project()
    services = (
        os.environ["DATABASE_URL"],
        os.environ["CELERY_BROKER_URL"],
        os.environ["REDIS_URL"],
    )
    return "shop", project.root, {**project.env(*services), **env}


def spawn_beat(
    *, scheduler: str | None = None, name: str = "bench-beat", shape: str = "demo", **env: str
) -> Proc:
    """``celery beat`` with the app's scheduler, or ``scheduler``; not waited for."""
    args = [
        "beat",
        "-l",
        "info",
        "--pidfile",
        "",
        "-s",
        str(LOG_DIR / f"beat-schedule-{time.time_ns()}"),
    ]
    if scheduler:
        args += ["-S", scheduler]
    app, cwd, env = _shape(shape, env)
    return spawn(name, celery(app, *args), cwd=cwd, **env)


def start_beat(
    *, scheduler: str | None = None, name: str = "bench-beat", shape: str = "demo", **env: str
) -> Proc:
    proc = spawn_beat(scheduler=scheduler, name=name, shape=shape, **env)
    proc.wait_for("beat: Starting", timeout=120)
    return proc


@contextmanager
def processes() -> Iterator[list[Proc]]:
    """Every process started inside is stopped on the way out, whatever happens."""
    started: list[Proc] = []
    try:
        yield started
    finally:
        for proc in started:
            proc.stop()


def wait_until(
    predicate: Callable[[], Any], *, timeout: float, interval: float = 0.2, what: str = "condition"
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def delete_queues(*names: str) -> None:
    from project.celery import app

    with app.connection_for_write() as conn:
        for name in names:
            try:
                conn.channel().queue_delete(name)
            except Exception:  # never declared
                pass


_LOG_TS = re.compile(r"^\[?(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})[: ]")


def log_timestamp(line: str) -> float | None:
    """Epoch seconds of a log line: Celery's ``[2026-01-01 12:00:00,123: INFO/...]`` or the
    project's ``2026-01-01 12:00:00,123 INFO ...``."""
    match = _LOG_TS.match(line)
    if not match:
        return None
    return datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").astimezone().timestamp()


def insert_future_runs(
    count: int, *, tasks: list[str], min_days: float = 1, max_days: float = 30
) -> float:
    """Store ``count`` pending runs due ``min_days``..``max_days`` ahead; returns seconds taken
    (including :func:`settle_after_bulk_load`).

    One ``INSERT ... SELECT generate_series`` per 100,000 rows, every NOT NULL column given.
    """
    from django.db import connection

    started = time.monotonic()
    chunk = 100_000
    with connection.cursor() as cur:
        for offset in range(0, count, chunk):
            n = min(chunk, count - offset)
            cur.execute(
                """
                INSERT INTO tasks_app_run (id, task_id, trigger, status, attempt, scheduled_for,
                    due_at, created_at, worker, output, truncated, error)
                SELECT gen_random_uuid(), (%s::text[])[1 + (g %% %s)], 'delay', 'pending', 1,
                       d, d, now(), '', '', false, ''
                FROM (SELECT g, now() + make_interval(secs => %s + random() * %s) AS d
                      FROM generate_series(1, %s) AS g) AS s
                """,
                [tasks, len(tasks), min_days * 86400, (max_days - min_days) * 86400, n],
            )
    settle_after_bulk_load()
    return round(time.monotonic() - started, 1)


def settle_after_bulk_load() -> None:
    """Leave the tables as a long-running deployment has them, not as a bulk load seconds
    ago does: vacuumed and analyzed (autovacuum would otherwise start on them mid-measurement)
    and the load's WAL checkpointed (a checkpoint would otherwise flush it mid-measurement)."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("VACUUM (ANALYZE) tasks_app_run")
        cur.execute("VACUUM (ANALYZE) tasks_app_task")
        cur.execute("CHECKPOINT")


def bench_superuser() -> Any:
    """The superuser whose session the page scenarios request with (``bench`` / ``bench-pw``),
    made on first use."""
    from django.contrib.auth import get_user_model

    user_model = get_user_model()
    user = user_model.objects.filter(username="bench").first()
    return user or user_model.objects.create_superuser("bench", "bench@example.com", "bench-pw")


def create_tasks(prefix: str, count: int, **fields: Any) -> list[str]:
    from tasks_app.models import Task

    ids = [f"{prefix}-{i:06d}" for i in range(count)]
    Task.objects.bulk_create(
        [Task(id=task_id, action="noop", queue=QUEUE, **fields) for task_id in ids],
        batch_size=2000,
    )
    set_task_states({task_id: None for task_id in ids})
    return ids


def set_task_states(next_runs: dict[str, datetime | None], status: str = "pending") -> None:
    """Set the state rows of the tasks ``next_runs`` names (inserted with each task, status
    ``created``): ``status`` and each one's next fire."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            """UPDATE tasks_app_taskstate AS s SET status = %s, next_run_at = v.next_run_at
                 FROM unnest(%s::varchar[], %s::timestamptz[]) AS v(id, next_run_at)
                WHERE s.task_id = v.id""",
            [status, list(next_runs), list(next_runs.values())],
        )
