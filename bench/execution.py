"""Scenario 3: execution throughput of no-op runs (whole lifecycle recorded) on a 2-process
worker, beside raw Celery no-op tasks on the same broker, same run.

Each side gets its whole backlog published before its worker starts (ours: the queue
declared as the worker declares it, the runs released by the service beat calls). The rate
is ``(n - 1) / (last start - first start)``; ours and raw Celery are measured in alternating
rounds (3 in a full run) and each side's median round compared. Ours records claim
(queued -> running), the action, completion, lateness and the task's status per run; raw
Celery records one timestamp. An extra anchor row runs raw Celery with our delivery settings
(late ack, prefetch 1), to tell what the delivery guarantees cost from what the recorded
lifecycle costs, and a floor row runs raw Celery tasks with our delivery settings that each
make two one-row Postgres writes (start and end), the least any design recording both ends
of every run durably can cost.

Two peers that record every run's lifecycle in Postgres, same broker and database server,
same run, same measurement (the first start to the last, each task/job stamping its start in
Redis): Celery with django-celery-results' database backend (``task_track_started``,
``result_extended``: what a Django shop records runs with today), and Procrastinate (pinned
below, in its own virtualenv ``var/bench-venvs/procrastinate``; 2 worker processes, at each
of ``PROCRASTINATE_CONCURRENCY`` asynchronous jobs per process, the best one compared).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from bench import common
from tasks_app.worker import run_execution

SIZES = {
    "full": {"runs": 6_000, "rounds": 3, "in_process_runs": 3_000},
    "quick": {"runs": 1_500, "rounds": 1, "in_process_runs": 1_000},
}
# Procrastinate's latest 3.x, with the psycopg and redis clients the project itself pins.
PROCRASTINATE_PINS = ["procrastinate==3.10.0", "psycopg[binary]==3.3.9", "redis==8.1.0"]
PROCRASTINATE_VENV = common.ROOT / "var" / "bench-venvs" / "procrastinate"
PROCRASTINATE_CONCURRENCY = (1, 4, 16)


def measure_ours(n: int, *, shape: str = "installed") -> dict[str, Any]:
    """Our drain rate, the worker of the installed project (or of the demo: ``shape``)."""
    from celery import current_app
    from django.db.models import Max, Min

    from tasks_app import services
    from tasks_app.messaging import queues
    from tasks_app.models import Run, RunStatus

    _load_runs("exec", n, status="pending")
    # The queue is declared as the worker declares it, and the whole backlog published before
    # the worker starts, as for every anchor: the span holds execution only.
    queues.check(current_app, [common.QUEUE])
    publish_started = time.monotonic()
    released = services.release_due_runs()
    publish_s = time.monotonic() - publish_started
    with common.processes() as procs:
        procs.append(common.start_worker(shape=shape))
        done = Run.objects.filter(status__in=[RunStatus.COMPLETED, RunStatus.FAILED])
        common.wait_until(lambda: done.count() >= n, timeout=600, interval=1)
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


def _load_runs(prefix: str, n: int, *, status: str) -> None:
    """Empty tables, 200 no-op tasks and ``n`` runs of theirs due now in ``status``
    (``pending``, or ``queued`` as if released), with fresh statistics."""
    from django.db import connection

    common.reset_tables()
    tasks = common.create_tasks(prefix, 200)
    with connection.cursor() as cur:
        cur.execute(
            """INSERT INTO tasks_app_run (id, task_id, trigger, status, attempt, scheduled_for,
                   due_at, queued_at, created_at, worker, output, truncated, error)
               SELECT gen_random_uuid(), (%s::text[])[1 + (g %% %s)], 'api', %s, 1,
                      now(), now(), CASE WHEN %s = 'queued' THEN now() END, now(),
                      '', '', false, ''
               FROM generate_series(1, %s) AS g""",
            [tasks, len(tasks), status, status, n],
        )
    # Statistics of what was just loaded, as a deployment's tables have them (the previous
    # round's would otherwise steer the plans).
    common.vacuum("tasks_app_run", "tasks_app_task", "tasks_app_taskstate")


def measure_in_process(n: int) -> dict[str, Any]:
    """Without Celery: one process executes ``n`` queued runs one after another as a pool
    process does (claim, the no-op action, completion: ``run_execution.run_execute``) and makes
    the floor's two one-row ``UPDATE``s (``bench.anchor_app.two_writes``) ``n`` times on a
    connection of its own, the two sides taking turns in chunks of ``CHUNK`` so that both
    meet the same machine (a shared host's speed drifts within a round: measured one after
    the other, the ratio of the two moved from 1.1 to 2.2 between rounds). Per run: wall
    time, this process's CPU and each side's Postgres backend's CPU (``/proc``; ``None``
    when Postgres runs elsewhere), summed over the side's chunks. What the lifecycle's
    statements cost, apart from the broker and the pool, which the rows above include."""
    import logging

    import psycopg
    from django.db import connection

    from bench import anchor_app
    from tasks_app.models import Run

    _load_runs("inproc", n, status="queued")
    ids = [str(i) for i in Run.objects.order_by("?").values_list("id", flat=True)]
    _reset_floor_table(anchor_app.FLOOR_ROWS)
    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        ours_backend = cur.fetchone()[0]
    logging.disable(logging.INFO)  # a worker's two lines per run would flood the bench log
    try:
        with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as pg:
            sides = {
                "ours": _Side(
                    lambda i: run_execution.run_execute(run_id=ids[i], worker="bench-inprocess"),
                    ours_backend,
                ),
                "floor": _Side(
                    lambda i: anchor_app.two_writes(pg, i % anchor_app.FLOOR_ROWS),
                    pg.info.backend_pid,
                ),
            }
            for side in sides.values():
                side.step(0)  # warm-up: connects, prepares
            for first in range(1, n, CHUNK):
                for side in sides.values():
                    side.measure(range(first, min(first + CHUNK, n)))
            result = {name: side.per_run() for name, side in sides.items()}
    finally:
        logging.disable(logging.NOTSET)
    common.reset_tables()
    return result


# Steps per turn of each side in measure_in_process: short enough that both meet the same
# machine, long enough for the backends' CPU clock (10 ms ticks) to count each turn.
CHUNK = 200


class _Side:
    """One side of measure_in_process: ``step(i)`` and its totals over the chunks it ran."""

    def __init__(self, step: Callable[[int], None], backend_pid: int) -> None:
        self.step, self.backend_pid = step, backend_pid
        self.steps, self.wall, self.cpu = 0, 0.0, 0.0
        self.backend: float | None = 0.0

    def measure(self, steps: range) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        backend = _backend_cpu(self.backend_pid)
        for i in steps:
            self.step(i)
        after = _backend_cpu(self.backend_pid)
        self.wall += time.perf_counter() - wall
        self.cpu += time.process_time() - cpu
        self.steps += len(steps)
        if self.backend is not None:
            self.backend = (
                None if backend is None or after is None else self.backend + after - backend
            )

    def per_run(self) -> dict[str, Any]:
        """ms per step of wall time, this process's CPU and the Postgres backend's CPU."""
        per = 1000 / self.steps
        return {
            "runs": self.steps,
            "wall_ms": round(self.wall * per, 3),
            "client_cpu_ms": round(self.cpu * per, 3),
            "postgres_cpu_ms": None if self.backend is None else round(self.backend * per, 3),
        }


def _backend_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) of process ``pid`` so far; ``None`` if not on this host."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
      design that durably records both ends of every run pays on this machine;
    - ``results``: no-op tasks, Celery's default delivery, results in Postgres through
      django-celery-results (``task_track_started``, ``result_extended``).
    """
    # A fresh queue name per measurement: kombu remembers which queues a pooled connection
    # declared, so re-using a name deleted by the previous measurement drops the messages.
    suffix = f"{os.getpid()}-{kind}-{time.monotonic_ns()}"
    queue, key = f"bench-raw-{suffix}", f"bench:raw:{suffix}"
    env = {
        "ANCHOR_MODE": "results" if kind == "results" else "classic",
        "ANCHOR_QUEUE": queue,
        "ANCHOR_KEY": key,
    }
    if kind in ("same", "floor"):
        config_dir = Path(tempfile.mkdtemp(prefix="bench-anchor-config-"))
        (config_dir / "anchor_same_delivery.py").write_text(SAME_DELIVERY)
        env.update(
            CELERY_CONFIG_MODULE="anchor_same_delivery",
            PYTHONPATH=os.pathsep.join([str(config_dir), str(common.ROOT)]),
        )
    from bench import anchor_app

    if kind == "floor":
        _reset_floor_table(anchor_app.FLOOR_ROWS)
    if kind == "results":
        common.reset_tables()
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
                else:  # the message carries whether the worker stores a result
                    anchor_app.raw_noop.apply_async(
                        queue=queue, producer=producer, ignore_result=kind != "results"
                    )
        with common.processes() as procs:
            procs.append(
                common.start_worker(app="bench.anchor_app", queue=queue, name="anchor-raw", **env)
            )
            common.wait_until(lambda: store.llen(key) >= n, timeout=600, interval=0.5)
        stamps = sorted(float(x) for x in store.lrange(key, 0, -1))
    finally:
        store.delete(key)
        common.delete_queues(queue)
    recorded = {}
    if kind == "results":
        recorded = {"results_recorded_success": _results_recorded()}
        common.reset_tables()
    return {**_rate(n, stamps), **recorded}


def _rate(n: int, stamps: list[float]) -> dict[str, Any]:
    span = stamps[-1] - stamps[0] if len(stamps) > 1 else None
    return {
        "tasks": n,
        "completed": len(stamps),
        "span_s": round(span, 2) if span else None,
        "tasks_per_s": round((len(stamps) - 1) / span, 1) if span else None,
    }


def _results_recorded() -> int:
    from django_celery_results.models import TaskResult

    return TaskResult.objects.filter(status="SUCCESS").count()


def procrastinate_python() -> Path:
    """The Procrastinate virtualenv's interpreter, made (or brought to the pins) on first use."""
    python = PROCRASTINATE_VENV / "bin" / "python"
    stamp = PROCRASTINATE_VENV / ("installed-" + "-".join(PROCRASTINATE_PINS).replace("/", "_"))
    if not stamp.exists():
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(PROCRASTINATE_VENV)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *PROCRASTINATE_PINS],
            check=True,
            timeout=900,
        )
        stamp.touch()
    return python


def measure_procrastinate(n: int, *, concurrency: int) -> dict[str, Any]:
    """``n`` no-op jobs deferred before its 2 worker processes start (as for raw Celery),
    in a database of its own on the same Postgres server (its schema applied fresh)."""
    import psycopg

    python = procrastinate_python()
    db = f"{common.BENCH_DB}_procrastinate"
    url = os.environ["DATABASE_URL"]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{db}"')
    key = f"bench:procrastinate:{os.getpid()}"
    extra = {
        "PROCRASTINATE_DATABASE_URL": url.rsplit("/", 1)[0] + f"/{db}",
        "ANCHOR_KEY": key,
        "PYTHONPATH": str(common.ROOT),
    }
    env = {**os.environ, **extra}
    cli = [str(python), "-m", "procrastinate", "--app=bench.procrastinate_app.app"]
    subprocess.run([*cli, "schema", "--apply"], env=env, cwd=common.ROOT, check=True, timeout=120)
    defer = (
        "from bench.procrastinate_app import app, noop\n"
        f"with app.open():\n    noop.batch_defer(*[{{}} for _ in range({n})])\n"
    )
    subprocess.run([str(python), "-c", defer], env=env, cwd=common.ROOT, check=True, timeout=600)
    store = redis.Redis.from_url(os.environ["REDIS_URL"])
    store.delete(key)
    try:
        with common.processes() as procs:
            for i in range(2):
                procs.append(
                    common.spawn(
                        f"procrastinate-{i}",
                        [*cli, "worker", "-q", "bench", "-c", str(concurrency), "-n", f"w{i}"],
                        **extra,
                    )
                )
            common.wait_until(lambda: store.llen(key) >= n, timeout=600, interval=0.5)
        stamps = sorted(float(x) for x in store.lrange(key, 0, -1))
    finally:
        store.delete(key)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    return {**_rate(n, stamps), "concurrency": concurrency}


def _median_round(results: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The round whose ``key`` is the median (the lower middle of an even count)."""
    ranked = sorted(results, key=lambda r: r[key] or 0)
    return ranked[(len(ranked) - 1) // 2]


def _reset_floor_table(rows: int) -> None:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS bench_floor")
        cur.execute(
            "CREATE TABLE bench_floor (id int PRIMARY KEY, started bigint, finished bigint)"
        )
        cur.execute("INSERT INTO bench_floor SELECT g, 0, 0 FROM generate_series(0, %s) g", [rows])


def run(results_dir: Path, *, quick: bool = False) -> dict[str, Any]:
    size = SIZES["quick" if quick else "full"]
    n = size["runs"]
    # Ours and raw Celery alternate, round after round; each side's median round is compared
    # (the machine's speed drifts by tens of percent within minutes).
    # Ours is the project a team installs (docs/install.md, from the wheel); the demo project
    # runs the same backlog in the same rounds, to show the installed shape gives up nothing.
    rounds = [
        (measure_ours(n), measure_raw(n), measure_ours(n, shape="demo"))
        for _ in range(size["rounds"])
    ]
    ours = _median_round([o for o, _, _ in rounds], "runs_per_s")
    raw = _median_round([r for _, r, _ in rounds], "tasks_per_s")
    demo = _median_round([d for _, _, d in rounds], "runs_per_s")
    same = measure_raw(n, kind="same")
    floor = measure_raw(n, kind="floor")
    results = measure_raw(n, kind="results")
    procrastinate = [measure_procrastinate(n, concurrency=c) for c in PROCRASTINATE_CONCURRENCY]
    # Three alternating rounds of the in-process pair as well; the median of each.
    in_process = [measure_in_process(size["in_process_runs"]) for _ in range(size["rounds"])]
    best = max(procrastinate, key=lambda r: r["tasks_per_s"] or 0)
    return {
        "scenario": "execution_throughput",
        "inputs": {"runs": n, "rounds": size["rounds"], "worker_processes": 2},
        "rounds": {
            "ours_runs_per_s": [o["runs_per_s"] for o, _, _ in rounds],
            "raw_tasks_per_s": [r["tasks_per_s"] for _, r, _ in rounds],
            "demo_runs_per_s": [d["runs_per_s"] for _, _, d in rounds],
        },
        "ours": {**ours, "project": "docs/install.md, from the wheel"},
        "extra_ours_demo_project": {**demo, "project": "the demo project (project/)"},
        "anchor_raw_celery": raw,
        "extra_anchor_raw_celery_same_delivery": {
            **same,
            "settings": "task_acks_late, task_reject_on_worker_lost, prefetch 1",
        },
        "extra_anchor_two_writes_floor": {
            **floor,
            "settings": "same delivery + time limits; two one-row UPDATE round trips per task",
        },
        "anchor_celery_django_celery_results": {
            **results,
            "settings": "Celery defaults + result_backend django-db, task_track_started, "
            "result_extended",
        },
        "extra_in_process": {
            "ours": _median_round([r["ours"] for r in in_process], "wall_ms"),
            "floor": _median_round([r["floor"] for r in in_process], "wall_ms"),
            "rounds": in_process,
            "settings": "one process, no broker: run_execution.run_execute per run against the "
            "floor's two one-row UPDATEs; per run, median of the rounds by wall time",
        },
        "anchor_procrastinate": {
            **best,
            "version": PROCRASTINATE_PINS[0],
            "by_concurrency": procrastinate,
            "settings": "2 worker processes, best concurrency of "
            f"{list(PROCRASTINATE_CONCURRENCY)}",
        },
        "ratios": {
            "installed_vs_demo_runs_per_s": common.ratio(ours["runs_per_s"], demo["runs_per_s"]),
            "runs_per_s_vs_raw": common.ratio(ours["runs_per_s"], raw["tasks_per_s"]),
            "runs_per_s_vs_celery_results": common.ratio(
                ours["runs_per_s"], results["tasks_per_s"]
            ),
            "runs_per_s_vs_procrastinate": common.ratio(ours["runs_per_s"], best["tasks_per_s"]),
            "extra_runs_per_s_vs_raw_same_delivery": common.ratio(
                ours["runs_per_s"], same["tasks_per_s"]
            ),
            "extra_runs_per_s_vs_two_writes_floor": common.ratio(
                ours["runs_per_s"], floor["tasks_per_s"]
            ),
            "extra_two_writes_floor_vs_raw": common.ratio(floor["tasks_per_s"], raw["tasks_per_s"]),
        },
        "targets": {
            "installed_vs_demo_runs_per_s": 0.95,
            "runs_per_s_vs_raw": 0.35,
            "runs_per_s_vs_celery_results": 2.5,
            "runs_per_s_vs_procrastinate": 1.0,
        },
    }
