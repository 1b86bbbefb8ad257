"""``manage.py tasks sync`` of many declared schedules: ``python -m bench.sync [N ...]``.

For each N (default 1,000 and 10,000) a schedules module of N definitions is written (half
interval, half cron in a few time zones, each with a payload and a policy), the tables the
sync writes are emptied, and three commands are timed as a release runs them: the first
sync (N tasks created), an unchanged re-sync, and ``--check``. Then one definition in a
hundred is changed and the sync that updates them is timed. ``DATABASE_URL`` names the
database (migrated here; its tasks are deleted). Results: ``bench/results/sync.json``.
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
ZONES = ("UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo")


def module_text(count: int, *, changed_every: int = 0) -> str:
    lines = ["from tasks_app.schedules import Schedule", "", "SCHEDULES = ["]
    for i in range(count):
        changed = changed_every and i % changed_every == 0
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


def timed(*args: str) -> tuple[float, str]:
    from django.core.management import CommandError, call_command

    out = StringIO()
    started = time.perf_counter()
    try:
        call_command("tasks", "sync", *args, stdout=out, stderr=StringIO())
    except CommandError as exc:
        out.write(f"\nexit {exc.returncode}")
    return time.perf_counter() - started, out.getvalue().strip().splitlines()[-1]


def reset() -> None:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            "TRUNCATE tasks_app_run, tasks_app_task, tasks_app_taskauditentry, "
            "django_celery_beat_periodictask, django_celery_beat_intervalschedule, "
            "django_celery_beat_crontabschedule CASCADE"
        )


def measure(count: int, folder: Path) -> dict[str, Any]:
    from django.conf import settings

    name = f"bench_schedules_{count}"
    path = folder / f"{name}.py"
    path.write_text(module_text(count))
    settings.TASKS_SCHEDULES_MODULE = name
    reset()
    first, first_line = timed()
    again, again_line = timed()
    check, check_line = timed("--check")
    sys.modules.pop(name, None)
    path.write_text(module_text(count, changed_every=100))
    update, update_line = timed()
    sys.modules.pop(name, None)
    result = {
        "schedules": count,
        "first_sync_s": round(first, 2),
        "unchanged_resync_s": round(again, 2),
        "check_s": round(check, 2),
        "one_percent_changed_sync_s": round(update, 2),
        "lines": [first_line, again_line, check_line, update_line],
    }
    print(json.dumps(result), flush=True)
    return result


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
