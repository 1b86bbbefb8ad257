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
- ``reset``: the table emptied.

Prints one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent
PACKAGES = {"tasks_db": "django-tasks-db", "ox": "django-ox"}


def create_database(name: str) -> None:
    import psycopg

    base = urlsplit(
        os.environ.get("ANCHOR_DATABASE_URL") or "postgres://root@127.0.0.1:5432/postgres"
    )
    admin = urlunsplit(base._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def table(anchor: str) -> str:
    if anchor == "tasks_db":
        from django_tasks_db.models import DBTaskResult

        return DBTaskResult._meta.db_table
    from django_ox.models import OxTask

    return OxTask._meta.db_table


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


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="anchor.py")
    parser.add_argument("anchor", choices=sorted(PACKAGES))
    parser.add_argument("mode", choices=["per_call", "bulk", "reset"])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--chunk", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=20)
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
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
