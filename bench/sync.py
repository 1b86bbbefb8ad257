"""``manage.py tasks sync`` of many declared schedules: ``make bench BENCH_ARGS=sync``
(1,000, 10,000 and 100,000; ``--quick``: 1,000) or ``python -m bench.sync [N ...]``.

For each N a schedules module of N definitions is written (half interval, half cron in a
few time zones, each with a payload and a policy), the tables the sync writes are emptied,
and three commands are timed as a release runs them: the first sync (N tasks created), an
unchanged re-sync, and ``--check``. Then one definition in a hundred is changed and one in
a hundred removed, and the sync that applies them is timed. Each step's statement count is
recorded beside its time (the rows written with ``COPY`` are not statements
Django sees: two per first sync).

The anchor, in the same run: stock django-celery-beat writing the same N code-declared
entries (``CELERY_BEAT_SCHEDULE``) into its database, as its ``DatabaseScheduler`` does at
start-up (``DatabaseScheduler(app=current_app, lazy=True).update_from_dict(entries)``), into
empty tables, then again unchanged, then with the same 1 % changed (the reloads up to
10,000 entries: above, the first load only). ``python -m bench.sync``
uses ``DATABASE_URL`` (migrated here; its tasks are deleted); ``make bench`` its bench
database. Results: ``bench/results/sync.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from io import StringIO
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
# Above this size the anchor's reloads are not timed (each writes every entry again, as its
# first load does: its statement counts at the smaller sizes show it), to keep the run short.
STOCK_RELOADS_UP_TO = 10_000
ZONES = ("UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo")


def module_text(count: int, *, changed_every: int = 0) -> str:
    """N definitions; with ``changed_every``, one in that many changed and one removed."""
    lines = ["from tasks_app.schedules import Schedule", "", "SCHEDULES = ["]
    for i in range(count):
        changed = changed_every and i % changed_every == 0
        if changed_every and i % changed_every == changed_every // 2:
            continue  # removed
        if i % 2:
            when = f'schedule_type="interval", interval_seconds={60 + i % 3600}'
        else:
            minute = (i + (1 if changed else 0)) % 60
            when = (
                f'schedule_type="cron", cron="{minute} {i % 24} * * *", timezone="{ZONES[i % 4]}"'
            )
        lines.append(
            f'    Schedule("declared-{i:05d}", name="Declared {i}", action="echo", '
            f'payload={{"message": "n{i}"}}, {when}, max_retries={2 if changed else 1}, '
            'overlap_policy="skip"),'
        )
    lines.append("]")
    return "\n".join(lines) + "\n"


def stock_entries(count: int, *, changed_every: int = 0) -> dict[str, dict[str, Any]]:
    """The same definitions as CELERY_BEAT_SCHEDULE entries (stock crontabs have no zone
    of their own: the app's)."""
    from celery.schedules import crontab

    entries: dict[str, dict[str, Any]] = {}
    for i in range(count):
        changed = changed_every and i % changed_every == 0
        if i % 2:
            schedule: Any = float(60 + i % 3600)
        else:
            schedule = crontab(minute=(i + (1 if changed else 0)) % 60, hour=i % 24)
        entries[f"declared-{i:05d}"] = {
            "task": "tasks_app.execute_task",
            "schedule": schedule,
            "kwargs": {"task_id": f"declared-{i:05d}", "max_retries": 2 if changed else 1},
        }
    return entries


class Statements:
    """Counts the statements sent on Django's connection."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.count += 1
        return execute(sql, params, many, context)


def counted(work: Any) -> tuple[float, int, Any]:
    from django.db import connection

    statements = Statements()
    started = time.perf_counter()
    with connection.execute_wrapper(statements):
        value = work()
    return time.perf_counter() - started, statements.count, value


def timed(*args: str) -> tuple[float, int, str]:
    from django.core.management import CommandError, call_command

    out = StringIO()

    def sync() -> None:
        try:
            call_command("tasks", "sync", *args, stdout=out, stderr=StringIO())
        except CommandError as exc:
            out.write(f"\nexit {exc.returncode}")

    seconds, statements, _ = counted(sync)
    return seconds, statements, out.getvalue().strip().splitlines()[-1]


def stock_load(entries: dict[str, dict[str, Any]]) -> tuple[float, int]:
    from celery import current_app
    from django_celery_beat.schedulers import DatabaseScheduler

    seconds, statements, _ = counted(
        lambda: DatabaseScheduler(app=current_app, lazy=True).update_from_dict(entries)
    )
    return seconds, statements


def reset() -> None:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            "TRUNCATE tasks_app_run, tasks_app_task, tasks_app_taskauditentry, "
            "django_celery_beat_periodictask, django_celery_beat_intervalschedule, "
            "django_celery_beat_crontabschedule CASCADE"
        )


def measure(count: int, folder: Path) -> dict[str, Any]:
    from django.test import override_settings

    name = f"bench_schedules_{count}"
    path = folder / f"{name}.py"
    path.write_text(module_text(count))
    with override_settings(TASKS_SCHEDULES_MODULE=name):
        return _measure(count, name, path)


def _measure(count: int, name: str, path: Path) -> dict[str, Any]:
    reset()
    first, first_n, first_line = timed()
    again, again_n, again_line = timed()
    check, check_n, check_line = timed("--check")
    sys.modules.pop(name, None)
    path.write_text(module_text(count, changed_every=100))
    update, update_n, update_line = timed()
    sys.modules.pop(name, None)
    print(
        json.dumps({"schedules": count, "first": first, "unchanged": again, "changed": update}),
        flush=True,
    )
    reset()
    stock_first, stock_first_n = stock_load(stock_entries(count))
    stock_again = stock_update = None
    stock_again_n = stock_update_n = None
    if count <= STOCK_RELOADS_UP_TO:
        stock_again, stock_again_n = stock_load(stock_entries(count))
        stock_update, stock_update_n = stock_load(stock_entries(count, changed_every=100))
    reset()
    result = {
        "schedules": count,
        "first_sync_s": round(first, 2),
        "unchanged_resync_s": round(again, 2),
        "check_s": round(check, 2),
        "one_percent_changed_sync_s": round(update, 2),
        "statements": {
            "first_sync": first_n,
            "unchanged_resync": again_n,
            "check": check_n,
            "one_percent_changed_sync": update_n,
        },
        "lines": [first_line, again_line, check_line, update_line],
        "anchor_stock_update_from_dict": {
            "first_load_s": round(stock_first, 2),
            "unchanged_reload_s": stock_again and round(stock_again, 2),
            "one_percent_changed_reload_s": stock_update and round(stock_update, 2),
            "statements": {
                "first_load": stock_first_n,
                "unchanged_reload": stock_again_n,
                "one_percent_changed_reload": stock_update_n,
            },
        },
    }
    print(json.dumps(result), flush=True)
    return result


def run(results: Path, *, quick: bool = False) -> dict[str, Any]:
    """The ``make bench`` scenario (django set up on the bench database)."""
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)
    counts = [1000] if quick else [1000, 10000, 100000]
    sys.dont_write_bytecode = True
    with tempfile.TemporaryDirectory() as folder:
        sys.path.insert(0, folder)
        try:
            sizes = [measure(count, Path(folder)) for count in counts]
        finally:
            sys.path.remove(folder)
    reset()
    return {"scenario": "sync", "sizes": sizes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sync", description=__doc__)
    parser.add_argument("counts", nargs="*", type=int, default=[1000, 10000])
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)
    sys.dont_write_bytecode = True
    with tempfile.TemporaryDirectory() as folder:
        sys.path.insert(0, folder)
        results = [measure(count, Path(folder)) for count in args.counts]
    reset()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "sync.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
