"""Scenario 2: 10,000 interval schedules every 10 s, beat run for 120 s; then stock
django-celery-beat ``DatabaseScheduler`` on the same schedules, same run.

Fires are spread evenly over the 10 s (1,000 fires/s). Ours: every fire is a ``Run`` row;
recorded lateness is ``created_at - scheduled_for`` (negative: recorded ahead, as designed:
fires are recorded up to the release horizon early and published with an exact ETA).
Stock: each "Sending due task" log line is a fire; its lateness is measured against the
schedule grid the entry was created on. Messages of both go to one queue that a drainer
empties (no worker), so the broker never piles them up.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench import common

SIZES = {
    "full": {"schedules": 10_000, "every_s": 10, "duration_s": 120},
    "quick": {"schedules": 2_000, "every_s": 10, "duration_s": 30},
}
DRAINER = """
import os, sys
from kombu import Connection, Queue
with Connection(os.environ['CELERY_BROKER_URL']) as conn:
    # Declared exactly as Celery declares it (x-max-priority), so publishers' declares match.
    q = Queue(sys.argv[1], channel=conn.default_channel, max_priority=int(sys.argv[2]))
    q.declare()
    def drop(body, message): pass
    with conn.Consumer(q, callbacks=[drop], no_ack=True, prefetch_count=0):
        while True:
            try:
                conn.drain_events(timeout=1)
            except TimeoutError:
                pass
"""


def start_drainer(queue: str) -> common.Proc:
    from django.conf import settings

    priority = str(settings.CELERY_TASK_QUEUE_MAX_PRIORITY or 0)
    proc = common.spawn("drainer", [sys.executable, "-c", DRAINER, queue, priority])
    time.sleep(1)
    return proc


def setup_owned(count: int, every: int, first_at: float) -> list[str]:
    """``count`` tasks each owning a PeriodicTask, as the services create them, in bulk."""
    from datetime import UTC, datetime

    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    from tasks_app.models import Task, TaskStatus

    interval = IntervalSchedule.objects.create(every=every, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.bulk_create(
        [
            PeriodicTask(
                name=f"task:own-{i:06d}",
                task="tasks_app.execute_task",
                interval=interval,
                args=f'["own-{i:06d}"]',
                queue=common.QUEUE,
            )
            for i in range(count)
        ],
        batch_size=2000,
    )
    periodic = dict(
        PeriodicTask.objects.filter(name__startswith="task:own-").values_list("name", "id")
    )
    base = datetime.fromtimestamp(first_at, UTC)
    Task.objects.bulk_create(
        [
            Task(
                id=f"own-{i:06d}",
                action="noop",
                queue=common.QUEUE,
                schedule_type="interval",
                interval_seconds=every,
                status=TaskStatus.PENDING,
                periodic_task_id=periodic[f"task:own-{i:06d}"],
                next_run_at=base + timedelta(seconds=every * i / count),
            )
            for i in range(count)
        ],
        batch_size=2000,
    )
    common.vacuum("tasks_app_task", "django_celery_beat_periodictask")
    return [f"own-{i:06d}" for i in range(count)]


def measure_ours(size: dict[str, int], *, beats: int = 1) -> dict[str, Any]:

    common.reset_tables()
    every, duration = size["every_s"], size["duration_s"]
    with common.processes() as procs:
        procs.append(start_drainer(common.QUEUE))
        first_at = time.time() + 15  # beat start-up (Django import) takes a few seconds
        setup_owned(size["schedules"], every, first_at)
        for _ in range(beats):
            procs.append(common.start_beat(TASKS_BEAT_LOG_TICKS="1"))
        time.sleep(max(first_at - time.time(), 0) + duration)
        beat = procs[1]
        beat_rss = beat.rss_mb()
        window = (first_at, first_at + duration - 6)  # fully inside the run
        procs[1].stop()
        log = beat.log()
    stats = fires_stats(window, every, size["schedules"])
    dupes = duplicate_fires()
    ticks = [float(m) for m in re.findall(r"tick_ms=([\d.]+)", log)]
    common.reset_tables()
    return {
        **stats,
        "duplicates": dupes,
        "beat_rss_mb": beat_rss,
        "tick_ms": common.percentiles(ticks),
    }


def duplicate_fires() -> int:
    """How many ``(task, scheduled_for)`` pairs were recorded more than once."""
    from django.db.models import Count

    from tasks_app.models import Run

    return (
        Run.objects.values("task_id", "scheduled_for")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count()
    )


def fires_stats(window: tuple[float, float], every: int, count: int) -> dict[str, Any]:
    from datetime import UTC, datetime

    from django.db.models import F

    from tasks_app.models import Run

    lo, hi = (datetime.fromtimestamp(x, UTC) for x in window)
    runs = Run.objects.filter(trigger="schedule", scheduled_for__gte=lo, scheduled_for__lt=hi)
    recorded = runs.count()
    lateness = [
        d.total_seconds() * 1000
        for d in runs.annotate(late=F("created_at") - F("scheduled_for")).values_list(
            "late", flat=True
        )
    ]
    publish = [
        d.total_seconds() * 1000
        for d in runs.annotate(late=F("queued_at") - F("scheduled_for")).values_list(
            "late", flat=True
        )
        if d is not None
    ]
    expected = round((window[1] - window[0]) / every * count)
    within_1s = sum(1 for x in lateness if x <= 1000)
    return {
        "window_s": round(window[1] - window[0], 1),
        "expected_fires": expected,
        "recorded_fires": recorded,
        "missed": max(expected - recorded, 0),
        "recorded_within_1s_pct": round(100 * within_1s / expected, 2) if expected else None,
        "record_lateness_ms": common.percentiles(lateness),
        "queued_lateness_ms": common.percentiles(publish),
    }


SEND_LINE = re.compile(r"Sending due task (stock-\d+) ")


def measure_stock(size: dict[str, int]) -> dict[str, Any]:
    from datetime import UTC, datetime

    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    common.reset_tables()
    every, duration, count = size["every_s"], size["duration_s"], size["schedules"]
    interval = IntervalSchedule.objects.create(every=every, period=IntervalSchedule.SECONDS)
    with common.processes() as procs:
        procs.append(start_drainer(common.QUEUE))
        first_at = time.time() + 15
        # Entry i is first due at first_at + i/count * every: the same even spread as ours.
        PeriodicTask.objects.bulk_create(
            [
                PeriodicTask(
                    name=f"stock-{i:06d}",
                    task="bench.noop",
                    interval=interval,
                    queue=common.QUEUE,
                    last_run_at=datetime.fromtimestamp(first_at - every + every * i / count, UTC),
                )
                for i in range(count)
            ],
            batch_size=2000,
        )
        beat = common.start_beat(
            scheduler="django_celery_beat.schedulers:DatabaseScheduler", name="stock-beat"
        )
        procs.append(beat)
        time.sleep(max(first_at - time.time(), 0) + duration)
        beat_rss = beat.rss_mb()
        beat.stop()
        log = beat.log()
    window = (first_at, first_at + duration - 6)
    sends: dict[str, list[float]] = defaultdict(list)
    for line in log.splitlines():
        match = SEND_LINE.search(line)
        ts = common.log_timestamp(line)
        if match and ts:
            sends[match.group(1)].append(ts)
    lateness: list[float] = []
    in_window = 0
    for name, times in sends.items():
        i = int(name.split("-")[1])
        first_due = first_at + every * i / count
        for k, sent_at in enumerate(sorted(times)):
            intended = first_due + k * every  # the k-th instant of its grid
            if window[0] <= intended < window[1]:
                in_window += 1
                lateness.append((sent_at - intended) * 1000)
    expected = round((window[1] - window[0]) / every * count)
    common.reset_tables()
    return {
        "window_s": round(window[1] - window[0], 1),
        "expected_fires": expected,
        "sent_fires": in_window,
        "sent_total": sum(len(v) for v in sends.values()),
        "sent_pct": round(100 * in_window / expected, 2) if expected else None,
        "sent_within_1s_pct": round(100 * sum(1 for x in lateness if x <= 1000) / expected, 2)
        if expected
        else None,
        "send_lateness_ms": common.percentiles(lateness),
        "beat_rss_mb": beat_rss,
    }


def run(results_dir: Path, *, quick: bool = False) -> dict[str, Any]:
    size = SIZES["quick" if quick else "full"]
    ours = measure_ours(size)
    stock = measure_stock(size)
    return {
        "scenario": "beat_throughput",
        "inputs": size,
        "ours": ours,
        "anchor_stock_database_scheduler": stock,
        "ratios": {
            "fires_recorded_vs_stock_sent": common.ratio(
                ours["recorded_fires"], stock["sent_fires"]
            ),
            "within_1s_pct_vs_stock": common.ratio(
                ours["recorded_within_1s_pct"], stock["sent_within_1s_pct"] or None
            ),
        },
        "targets": {"recorded_within_1s_pct": 99, "duplicates": 0, "missed": 0},
    }


if __name__ == "__main__":  # pragma: no cover - debugging aid
    print(os.environ.get("DATABASE_URL"), subprocess.list2cmdline(sys.argv))
