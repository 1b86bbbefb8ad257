"""One round of an anchor of the ``enqueue`` scenario, in its own process and virtualenv.

    var/bench-anchors/<dir>/bin/python bench/anchors/anchor.py ANCHOR MODE [--calls N]
        [--chunk C] [--warmup W]

``ANCHOR``: ``tasks_db`` (django-tasks-db's ``DatabaseBackend``) or ``ox`` (django-ox's
``OxBackend``), each with its own settings module beside this file and its own database
(``$ANCHOR_DB``, created and migrated here, on the server of ``$ANCHOR_DATABASE_URL``).
Nothing of the project is imported: this runs on the anchor's packages only.

``MODE``:

- ``per_call``: the anchor's table emptied, ``W`` warm-up calls of
  ``anchor_tasks.noop.enqueue(i)``, then ``N`` calls in chunks of ``C`` (as the scenario's
  sides take turns), each timed from the call to its return, autocommit (each call its own
  transaction: one ``INSERT`` for both anchors); prints the median milliseconds per call;
- ``bulk`` (``ox`` only): the table emptied, one warm-up batch of ``W`` calls, then
  ``django_ox.bulk.enqueue_many(noop, [((i,), {}) for i in range(N)])`` timed from the call
  to its return (its own transaction, committed: the rows are the queue; django-ox publishes
  nothing anywhere else); prints the seconds and the rows then in the table;
- ``throughput``: the table emptied, a backlog of ``N`` no-op calls enqueued (django-ox:
  its ``enqueue_many``; django-tasks-db, which has none: ``enqueue`` in one transaction),
  then the anchor's own worker started on 2 processes (``--processes``): two
  ``db_worker`` processes (django-tasks-db), ``ox_worker --processes 2`` (django-ox), each
  with the package's defaults (one task at a time per process); once every call has
  finished (or ``--timeout``), the workers stopped and the rate read from the table as the
  project's ``execution`` scenario reads ours: ``(completed - 1) / (last start - first
  start)``;
- ``lateness``: the table emptied, the anchor's worker started on 2 processes as for
  ``throughput``, then ``N`` calls of ``noop.using(run_after=now + delay)`` at ``--rate`` a
  second, each delay 1 to ``--max-delay`` seconds from ``pacing.arrive`` (the same calls as
  ours); once they have settled, each call's ``started_at - run_after`` in milliseconds;
- ``reset``: the table emptied.

Prints one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent
STARTUP_S = 5  # a worker's start-up before the first lateness call (ours waits for "ready")
PACKAGES = {"tasks_db": "django-tasks-db", "ox": "django-ox"}
SETTLED = ["SUCCESSFUL", "FAILED", "LOST"]  # both tables: django.tasks' statuses (+ ox's LOST)


def create_database(name: str) -> None:
    import psycopg

    base = urlsplit(
        os.environ.get("ANCHOR_DATABASE_URL") or "postgres://root@127.0.0.1:5432/postgres"
    )
    admin = urlunsplit(base._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def model(anchor: str) -> Any:
    if anchor == "tasks_db":
        from django_tasks_db.models import DBTaskResult

        return DBTaskResult
    from django_ox.models import OxTask

    return OxTask


def table(anchor: str) -> str:
    return str(model(anchor)._meta.db_table)


def reset(anchor: str) -> None:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(f'TRUNCATE "{table(anchor)}" CASCADE')


def rows(anchor: str) -> int:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(f'SELECT count(*) FROM "{table(anchor)}"')
        return int(cur.fetchone()[0])


def per_call(calls: int, chunk: int, warmup: int) -> dict[str, Any]:
    from anchor_tasks import noop

    for i in range(warmup):
        noop.enqueue(i)
    times: list[float] = []
    for start in range(0, calls, chunk):
        for i in range(start, min(start + chunk, calls)):
            began = time.perf_counter()
            noop.enqueue(i)
            times.append((time.perf_counter() - began) * 1000)
    return {"per_call_ms": round(statistics.median(times), 3), "n": len(times)}


def bulk(anchor: str, calls: int, warmup: int) -> dict[str, Any]:
    if anchor != "ox":
        raise SystemExit(f"{anchor} has no bulk enqueue")
    from anchor_tasks import noop
    from django_ox.bulk import enqueue_many

    enqueue_many(noop, [((i,), {}) for i in range(warmup)])
    before = rows(anchor)
    batch = [((i,), {}) for i in range(calls)]  # built before the clock starts, as for ours
    began = time.perf_counter()
    results = enqueue_many(noop, batch)
    seconds = time.perf_counter() - began
    return {
        "bulk_s": round(seconds, 3),
        "results": len(results),
        "rows_written": rows(anchor) - before,
        "published": None,  # no broker: the committed rows are what its workers poll
    }


def worker_commands(anchor: str, processes: int) -> list[list[str]]:
    django = [sys.executable, "-m", "django"]
    if anchor == "ox":
        return [[*django, "ox_worker", "--processes", str(processes)]]
    # No random start-up delay: the rate is read between the first and the last start.
    return [[*django, "db_worker", "--no-startup-delay"] for _ in range(processes)]


@contextmanager
def workers_running(anchor: str, processes: int) -> Iterator[tuple[list[Any], Path]]:
    """The anchor's own worker on ``processes`` processes, stopped on the way out; yields
    the processes and the path of their log."""
    logs = Path(tempfile.gettempdir()) / "tasks-bench-logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"anchor-{anchor}-worker-{time.time_ns()}.log"
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    workers: list[Any] = []
    with log_path.open("wb") as log:
        try:
            for command in worker_commands(anchor, processes):
                workers.append(
                    subprocess.Popen(
                        command,
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
            yield workers, log_path
        finally:
            for worker in workers:
                _stop(worker)


def settle(anchor: str, calls: int, workers: list[Any], timeout: float) -> Any:
    """Wait until ``calls`` calls have settled (or ``timeout``, or a worker exited)."""
    settled = model(anchor).objects.filter(status__in=SETTLED)
    deadline = time.monotonic() + timeout
    while settled.count() < calls and time.monotonic() < deadline:
        if any(w.poll() is not None for w in workers):
            break
        time.sleep(0.5)
    return settled


def throughput(anchor: str, calls: int, processes: int, timeout: float) -> dict[str, Any]:
    from anchor_tasks import noop
    from django.db import transaction
    from django.db.models import Max, Min

    if anchor == "ox":
        from django_ox.bulk import enqueue_many

        enqueue_many(noop, [((i,), {}) for i in range(calls)])
    else:
        with transaction.atomic():
            for i in range(calls):
                noop.enqueue(i)
    with workers_running(anchor, processes) as (workers, log_path):
        settled = settle(anchor, calls, workers, timeout)
    done = model(anchor).objects.filter(status="SUCCESSFUL")
    completed = done.count()
    span = done.aggregate(first=Min("started_at"), last=Max("started_at"))
    seconds = (span["last"] - span["first"]).total_seconds() if span["first"] else 0
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            f'SELECT count(DISTINCT w) FROM "{table(anchor)}", '
            "jsonb_array_elements_text(worker_ids::jsonb) AS w"
        )
        workers_seen = int(cur.fetchone()[0])
    out: dict[str, Any] = {
        "runs": calls,
        "completed": completed,
        "settled": settled.count(),
        "span_s": round(seconds, 2),
        "tasks_per_s": round((completed - 1) / seconds, 1) if seconds else None,
        "workers": [" ".join(c[2:]) for c in worker_commands(anchor, processes)],
        "worker_ids_seen": workers_seen,  # the processes that claimed at least one call
    }
    if out["settled"] < calls:
        out["not_settled_in_time"] = True
        out["worker_log_tail"] = log_path.read_text(errors="replace")[-1500:]
    return out


def lateness(
    anchor: str, calls: int, rate: float, max_delay: float, processes: int, timeout: float
) -> dict[str, Any]:
    """The anchor's worker started (and given ``STARTUP_S`` to poll), then ``calls`` calls
    of ``noop.using(run_after=now + delay)`` at ``rate`` a second (``pacing.arrive``: the
    delays ours gets); once they have settled, each call's lateness ``started_at -
    run_after`` in milliseconds."""
    from datetime import timedelta

    import pacing
    from anchor_tasks import noop
    from django.utils import timezone

    def emit(i: int, delay: float) -> None:
        noop.using(run_after=timezone.now() + timedelta(seconds=delay)).enqueue(i)

    with workers_running(anchor, processes) as (workers, log_path):
        time.sleep(STARTUP_S)
        pacing.arrive(calls, rate=rate, max_delay=max_delay, emit=emit)
        settled = settle(anchor, calls, workers, timeout)
    done = model(anchor).objects.filter(status="SUCCESSFUL")
    late_ms = [
        (started - due).total_seconds() * 1000
        for started, due in done.values_list("started_at", "run_after")
    ]
    out: dict[str, Any] = {
        "runs": calls,
        "settled": settled.count(),
        "late_ms": [round(v, 1) for v in late_ms],
        "workers": [" ".join(c[2:]) for c in worker_commands(anchor, processes)],
    }
    if out["settled"] < calls:
        out["not_settled_in_time"] = True
        out["worker_log_tail"] = log_path.read_text(errors="replace")[-1500:]
    return out


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    except ProcessLookupError:
        pass


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="anchor.py")
    parser.add_argument("anchor", choices=sorted(PACKAGES))
    parser.add_argument("mode", choices=["per_call", "bulk", "throughput", "lateness", "reset"])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--chunk", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--rate", type=float, default=50)
    parser.add_argument("--max-delay", type=float, default=60)
    args = parser.parse_args(argv)

    sys.path.insert(0, str(HERE))
    os.environ.setdefault("ANCHOR_DB", f"bench_anchor_{args.anchor}")
    os.environ["DJANGO_SETTINGS_MODULE"] = f"settings_{args.anchor}"
    create_database(os.environ["ANCHOR_DB"])
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)
    reset(args.anchor)
    out: dict[str, Any] = {
        "anchor": args.anchor,
        "mode": args.mode,
        "versions": {
            PACKAGES[args.anchor]: importlib.metadata.version(PACKAGES[args.anchor]),
            "Django": django.get_version(),
            "python": platform.python_version(),
        },
        "database": os.environ["ANCHOR_DB"],
    }
    if args.mode == "per_call":
        out |= per_call(args.calls, args.chunk, args.warmup)
    elif args.mode == "bulk":
        out |= bulk(args.anchor, args.calls, args.warmup)
    elif args.mode == "throughput":
        out |= throughput(args.anchor, args.calls, args.processes, args.timeout)
        reset(args.anchor)
    elif args.mode == "lateness":
        out |= lateness(
            args.anchor, args.calls, args.rate, args.max_delay, args.processes, args.timeout
        )
        reset(args.anchor)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
