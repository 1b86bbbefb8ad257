"""Scenario 2: beat, like with like — ours (``TaskScheduler``) and stock django-celery-beat
``DatabaseScheduler`` measured on the SAME events, in the same run.

(a) **In the broker in time** — N interval schedules every 10 s (fires spread evenly over
    the period). A consumer process takes every message off the queue as it arrives and
    records its receipt time: the instant the message was in the broker (the same code
    for both sides). A fire counts as *in time* when its message arrived no later than 1 s
    after the fire's instant. Ours publishes each fire up to the release horizon ahead with
    an exact ETA, so arriving early is by design; stock sends when the entry is due.
    Ours' fire instant is the run's ``scheduled_for`` (joined by message id = run id);
    stock's is the k-th instant of the grid the entry was created on (``first due + k ×
    every``) — stock computes each next fire from the previous send, so its lateness also
    includes that drift, which a user of an "every 10 s" entry sees. Ours' ``queued_at``
    is reported too, but it is stamped before the publish is confirmed (the tick's instant),
    so it is a lower bound, not evidence.
(b) **Start lateness** — M schedules every 10 s with workers that keep up (2 prefork
    processes, the project's worker settings on both sides): ours ``started_at −
    scheduled_for`` of each run; stock: a no-op task records its start time (Redis), matched
    to the entry's grid instant as in (a).

Sizes: full (a) 10,000 / 10 s for 120 s, (b) 1,000 / 10 s for 60 s. ``--quick`` is small.
Targets: (a) ≥ 99 % in time; (b) p99 ≤ 50 ms.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import common

SIZES = {
    "full": {
        "broker": {"schedules": 10_000, "every_s": 10, "duration_s": 120},
        "start": {"schedules": 1_000, "every_s": 10, "duration_s": 60},
    },
    "quick": {
        "broker": {"schedules": 1_000, "every_s": 10, "duration_s": 30},
        "start": {"schedules": 100, "every_s": 10, "duration_s": 30},
    },
}
STOCK_QUEUE = "bench-stock"
START_KEY = "bench:stock-start"
LEAD_S = 15  # beat start-up (Django import) takes a few seconds
SETTLE_S = 6  # the window ends this long before the processes stop

CONSUMER = """
import os, sys, time
from kombu import Connection, Queue
out = open(sys.argv[3], "w", buffering=1)
with Connection(os.environ['CELERY_BROKER_URL']) as conn:
    # Declared exactly as Celery declares it (x-max-priority), so publishers' declares match.
    q = Queue(sys.argv[1], channel=conn.default_channel, max_priority=int(sys.argv[2]) or None)
    q.declare()
    def seen(body, message):
        h = message.headers or {}
        out.write(f"{time.time():.6f} {h.get('id')} {h.get('argsrepr')}\\n")
    with conn.Consumer(q, callbacks=[seen], no_ack=True, prefetch_count=0):
        while True:
            try:
                conn.drain_events(timeout=1)
            except TimeoutError:
                pass
"""


def _priority() -> str:
    from django.conf import settings

    return str(settings.CELERY_TASK_QUEUE_MAX_PRIORITY or 0)


def start_consumer(queue: str, out: Path) -> common.Proc:
    proc = common.spawn("consumer", [sys.executable, "-c", CONSUMER, queue, _priority(), str(out)])
    time.sleep(1)
    return proc


def receipts(path: Path) -> list[tuple[float, str, str]]:
    rows = []
    for line in path.read_text().splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3:
            rows.append((float(parts[0]), parts[1], parts[2]))
    return rows


def setup_owned(count: int, every: int, first_at: float) -> list[str]:
    """``count`` tasks each owning a PeriodicTask, as the services create them, in bulk."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    from tasks_app.models import Task

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
                periodic_task_id=periodic[f"task:own-{i:06d}"],
            )
            for i in range(count)
        ],
        batch_size=2000,
    )
    common.set_task_states(
        {f"own-{i:06d}": base + timedelta(seconds=every * i / count) for i in range(count)}
    )
    common.vacuum("tasks_app_task", "tasks_app_taskstate", "django_celery_beat_periodictask")
    return [f"own-{i:06d}" for i in range(count)]


def setup_stock(count: int, every: int, first_at: float, *, task: str) -> None:
    """``count`` hand-made entries; entry i first due at ``first_at + every * i / count``
    (the same even spread as ours), its index as its only argument."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    interval = IntervalSchedule.objects.create(every=every, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.bulk_create(
        [
            PeriodicTask(
                name=f"stock-{i:06d}",
                task=task,
                args=f"[{i}]",
                interval=interval,
                queue=STOCK_QUEUE,
                last_run_at=datetime.fromtimestamp(first_at - every + every * i / count, UTC),
            )
            for i in range(count)
        ],
        batch_size=2000,
    )
    common.vacuum("django_celery_beat_periodictask")


def grid_lateness(
    events: list[tuple[int, float]], size: dict[str, int], first_at: float
) -> tuple[list[float], int]:
    """Stock: match each entry's events (index, time), in order, to its grid instants;
    return the lateness (ms) of those whose instant is inside the window, and the count of
    events outside it."""
    every, count = size["every_s"], size["schedules"]
    lo, hi = window(size, first_at)
    by_entry: dict[int, list[float]] = defaultdict(list)
    for index, at in events:
        by_entry[index].append(at)
    lateness: list[float] = []
    for index, times in by_entry.items():
        first_due = first_at + every * index / count
        for k, at in enumerate(sorted(times)):
            instant = first_due + k * every
            if lo <= instant < hi:
                lateness.append((at - instant) * 1000)
    return lateness, sum(len(v) for v in by_entry.values())


def window(size: dict[str, int], first_at: float) -> tuple[float, float]:
    return first_at, first_at + size["duration_s"] - SETTLE_S


def expected(size: dict[str, int]) -> int:
    return round((size["duration_s"] - SETTLE_S) / size["every_s"] * size["schedules"])


def in_time(lateness_ms: list[float], size: dict[str, int]) -> dict[str, Any]:
    want = expected(size)
    ok = sum(1 for x in lateness_ms if x <= 1000)
    return {
        "expected_fires": want,
        "seen_fires": len(lateness_ms),
        "in_broker_within_1s_pct": round(100 * ok / want, 2) if want else None,
        "lateness_ms": common.percentiles(lateness_ms),
    }


def run_for(size: dict[str, int], first_at: float) -> None:
    time.sleep(max(first_at - time.time(), 0) + size["duration_s"])


def owned_fires(first_at: float, size: dict[str, int], stamp: str) -> dict[str, tuple[Any, ...]]:
    """Ours: run id -> (scheduled_for, the run's ``stamp`` column) for fires in the window."""
    from tasks_app.models import Run

    lo, hi = (datetime.fromtimestamp(x, UTC) for x in window(size, first_at))
    rows = Run.objects.filter(
        trigger="schedule", scheduled_for__gte=lo, scheduled_for__lt=hi
    ).values_list("id", "scheduled_for", stamp)
    return {str(i): (s, v) for i, s, v in rows}


def measure_ours_broker(size: dict[str, int]) -> dict[str, Any]:
    common.reset_tables()
    out = common.LOG_DIR / f"receipts-ours-{time.time_ns()}.txt"
    with common.processes() as procs:
        procs.append(start_consumer(common.QUEUE, out))
        first_at = time.time() + LEAD_S
        setup_owned(size["schedules"], size["every_s"], first_at)
        beat = common.start_beat(TASKS_BEAT_LOG_TICKS="1")
        procs.append(beat)
        run_for(size, first_at)
        beat_rss = beat.rss_mb()
        beat.stop()
        time.sleep(1)  # the last messages reach the consumer
        log = beat.log()
    fires = owned_fires(first_at, size, "queued_at")
    arrived = {run_id: at for at, run_id, _ in receipts(out)}
    lateness = [
        (arrived[run_id] - scheduled.timestamp()) * 1000
        for run_id, (scheduled, _) in fires.items()
        if run_id in arrived
    ]
    queued = [(q - s).total_seconds() * 1000 for s, q in fires.values() if q is not None]
    ticks = [float(m) for m in re.findall(r"tick_ms=([\d.]+)", log)]
    dupes = duplicate_fires()
    common.reset_tables()
    return {
        **in_time(lateness, size),
        "recorded_fires": len(fires),
        "queued_at_lateness_ms": common.percentiles(queued),
        "duplicates": dupes,
        "beat_rss_mb": beat_rss,
        "tick_ms": common.percentiles(ticks),
    }


def measure_stock_broker(size: dict[str, int]) -> dict[str, Any]:
    common.reset_tables()
    out = common.LOG_DIR / f"receipts-stock-{time.time_ns()}.txt"
    with common.processes() as procs:
        procs.append(start_consumer(STOCK_QUEUE, out))
        first_at = time.time() + LEAD_S
        setup_stock(size["schedules"], size["every_s"], first_at, task="bench.stamp")
        beat = common.start_beat(
            scheduler="django_celery_beat.schedulers:DatabaseScheduler", name="stock-beat"
        )
        procs.append(beat)
        run_for(size, first_at)
        beat_rss = beat.rss_mb()
        beat.stop()
        time.sleep(1)
    events = [(int(args.strip("[]")), at) for at, _, args in receipts(out)]
    lateness, sent_total = grid_lateness(events, size, first_at)
    common.reset_tables()
    common.delete_queues(STOCK_QUEUE)
    return {**in_time(lateness, size), "sent_total": sent_total, "beat_rss_mb": beat_rss}


def measure_ours_start(size: dict[str, int]) -> dict[str, Any]:
    common.reset_tables()
    with common.processes() as procs:
        procs.append(common.start_worker(concurrency=2))
        first_at = time.time() + LEAD_S
        setup_owned(size["schedules"], size["every_s"], first_at)
        procs.append(common.start_beat())
        run_for(size, first_at)
    fires = owned_fires(first_at, size, "started_at")
    lateness = [
        (started - scheduled).total_seconds() * 1000
        for scheduled, started in fires.values()
        if started is not None
    ]
    common.reset_tables()
    return {"expected_fires": expected(size), "started": len(lateness), **_start(lateness)}


def measure_stock_start(size: dict[str, int]) -> dict[str, Any]:
    import redis

    store = redis.Redis.from_url(os.environ["REDIS_URL"])
    store.delete(START_KEY)
    common.reset_tables()
    env = {"BENCH_START_KEY": START_KEY}
    with common.processes() as procs:
        procs.append(
            common.start_worker(
                app="bench.stock_app", queue=STOCK_QUEUE, name="stock-worker", **env
            )
        )
        first_at = time.time() + LEAD_S
        setup_stock(size["schedules"], size["every_s"], first_at, task="bench.stamp")
        procs.append(
            common.start_beat(
                scheduler="django_celery_beat.schedulers:DatabaseScheduler", name="stock-beat"
            )
        )
        run_for(size, first_at)
    events = []
    for raw in store.lrange(START_KEY, 0, -1):
        index, at = raw.decode().split()
        events.append((int(index), float(at)))
    store.delete(START_KEY)
    lateness, _ = grid_lateness(events, size, first_at)
    common.reset_tables()
    common.delete_queues(STOCK_QUEUE)
    return {"expected_fires": expected(size), "started": len(lateness), **_start(lateness)}


def _start(lateness: list[float]) -> dict[str, Any]:
    return {"start_lateness_ms": common.percentiles(lateness)}


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


def _p99(result: dict[str, Any], key: str) -> float | None:
    value = result[key].get("p99")
    return float(value) if value is not None else None


def run(results_dir: Path, *, quick: bool = False) -> dict[str, Any]:
    size = SIZES["quick" if quick else "full"]
    steps: list[tuple[str, Callable[[dict[str, int]], dict[str, Any]], str]] = [
        ("ours", measure_ours_broker, "broker"),
        ("stock", measure_stock_broker, "broker"),
        ("ours", measure_ours_start, "start"),
        ("stock", measure_stock_start, "start"),
    ]
    out: dict[str, dict[str, Any]] = {"broker": {}, "start": {}}
    for side, measure, part in steps:
        print(f"[bench] beat_throughput: {part} {side}", flush=True)
        out[part][side] = measure(size[part])
    broker, start = out["broker"], out["start"]
    return {
        "scenario": "beat_throughput",
        "inputs": size,
        "in_broker": {"ours": broker["ours"], "anchor_stock_database_scheduler": broker["stock"]},
        "start_lateness": {
            "ours": start["ours"],
            "anchor_stock_database_scheduler": start["stock"],
        },
        "ratios": {
            "in_broker_within_1s_pct_ours_vs_stock": common.ratio(
                broker["ours"]["in_broker_within_1s_pct"],
                broker["stock"]["in_broker_within_1s_pct"] or None,
            ),
            "start_p99_ours_vs_stock": common.ratio(
                _p99(start["ours"], "start_lateness_ms"),
                _p99(start["stock"], "start_lateness_ms"),
            ),
        },
        "targets": {"in_broker_within_1s_pct": 99, "start_lateness_p99_ms": 50, "duplicates": 0},
    }


# Used by the memory and failover scenarios: a queue emptied without recording anything,
# and the recorded-fires figures of the previous version of this scenario.
DRAINER = """
import os, sys
from kombu import Connection, Queue
with Connection(os.environ['CELERY_BROKER_URL']) as conn:
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
    proc = common.spawn("drainer", [sys.executable, "-c", DRAINER, queue, _priority()])
    time.sleep(1)
    return proc


def fires_stats(window: tuple[float, float], every: int, count: int) -> dict[str, Any]:
    """Fires recorded by ours in ``window`` (the failover scenario's accounting)."""
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
    want = round((window[1] - window[0]) / every * count)
    return {
        "window_s": round(window[1] - window[0], 1),
        "expected_fires": want,
        "recorded_fires": recorded,
        "missed": max(want - recorded, 0),
        "record_lateness_ms": common.percentiles(lateness),
    }
