"""Scenario 4: worker memory with a large stored backlog vs idle; beat memory and tick time
with 10,000 schedules. Anchor: a plain Celery worker (default settings, same concurrency)
holding 100,000 ``countdown`` messages due tomorrow — the way plain Celery keeps future
work, in the worker's memory."""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import common
from bench.beat_throughput import setup_owned, start_drainer

SIZES = {
    "full": {
        "backlog": 1_000_000,
        "schedules": 10_000,
        "beat_s": 60,
        "settle_s": 20,
        "countdown_messages": 100_000,
    },
    "quick": {
        "backlog": 50_000,
        "schedules": 2_000,
        "beat_s": 20,
        "settle_s": 8,
        "countdown_messages": 10_000,
    },
}


def run(results_dir: Path, *, quick: bool = False) -> dict[str, Any]:
    size = SIZES["quick" if quick else "full"]
    common.reset_tables()
    with common.processes() as procs:
        worker = common.start_worker()
        procs.append(worker)
        time.sleep(size["settle_s"])
        idle = worker.rss_mb()
        insert_s = common.insert_future_runs(
            size["backlog"], tasks=common.create_tasks("mem", 10_000)
        )
        procs.append(common.start_beat())
        time.sleep(size["settle_s"])
        loaded = worker.rss_mb()
    common.reset_tables()
    with common.processes() as procs:
        procs.append(start_drainer(common.QUEUE))
        first_at = time.time() + 12
        setup_owned(size["schedules"], 10, first_at)
        beat = common.start_beat(TASKS_BEAT_LOG_TICKS="1")
        procs.append(beat)
        beat_start_rss = beat.rss_mb()
        time.sleep(max(first_at - time.time(), 0) + size["beat_s"])
        beat_rss = beat.rss_mb()
        beat.stop()
        ticks = [float(m) for m in re.findall(r"tick_ms=([\d.]+)", beat.log())]
    common.reset_tables()
    anchor = measure_countdown_anchor(size["countdown_messages"], settle_s=size["settle_s"])
    return {
        "scenario": "memory",
        "inputs": size,
        "ours": {
            "worker_rss_idle_mb": idle,
            "worker_rss_with_backlog_mb": loaded,
            "backlog_insert_s": insert_s,
            "beat_rss_start_mb": beat_start_rss,
            "beat_rss_mb": beat_rss,
            "beat_tick_ms": common.percentiles(ticks),
        },
        "anchor_celery_countdown": anchor,
        "ratios": {
            "worker_rss_backlog_vs_idle": common.ratio(loaded, idle),
            "worker_rss_backlog_vs_celery_countdown": common.ratio(
                loaded, anchor["worker_rss_holding_mb"]
            ),
        },
        "targets": {"worker_rss_backlog_vs_idle_max": 1.10},
    }


def measure_countdown_anchor(n: int, *, settle_s: float) -> dict[str, Any]:
    """Plain Celery's worker RSS idle, then holding ``n`` messages due in a day (published
    with ``countdown``; the worker fetches every ETA message and keeps it in memory).

    With the default prefetch the worker raises its QoS by one per ETA message it gets and
    took them at ~5 messages/s here (a day for 100,000 at that pace); the anchor lifts the
    prefetch limit (``worker_prefetch_multiplier = 0``) to reach the same end state — every
    message held by the worker — within the bench."""
    from bench import anchor_app

    queue = f"bench-memory-countdown-{os.getpid()}"
    config_dir = Path(tempfile.mkdtemp(prefix="bench-anchor-config-"))
    (config_dir / "anchor_hold_all.py").write_text("worker_prefetch_multiplier = 0\n")
    env = {
        "ANCHOR_MODE": "classic",
        "ANCHOR_QUEUE": queue,
        "ANCHOR_KEY": f"bench:mem:{queue}",
        "CELERY_CONFIG_MODULE": "anchor_hold_all",
        "PYTHONPATH": os.pathsep.join([str(config_dir), str(common.ROOT)]),
    }
    try:
        with common.processes() as procs:
            worker = common.start_worker(
                app="bench.anchor_app", queue=queue, name="anchor-mem", **env
            )
            procs.append(worker)
            time.sleep(settle_s)
            idle = worker.rss_mb()
            started = time.monotonic()
            due = time.time() + 86400
            with anchor_app.app.producer_or_acquire() as producer:
                for _ in range(n):
                    anchor_app.anchor.apply_async(
                        (due,), countdown=86400, queue=queue, producer=producer
                    )
            publish_s = time.monotonic() - started
            common.wait_until(lambda: _ready(queue) == 0, timeout=600, interval=1)
            time.sleep(settle_s)
            holding = worker.rss_mb()
            ready_left = _ready(queue)
    finally:
        common.delete_queues(queue)
    return {
        "mode": "plain Celery, -c 2, countdown=86400, prefetch unlimited (all held)",
        "messages": n,
        "publish_s": round(publish_s, 1),
        "messages_left_in_broker": ready_left,
        "worker_rss_idle_mb": idle,
        "worker_rss_holding_mb": holding,
    }


def _ready(queue: str) -> int:
    """Messages of ``queue`` still in the broker, not yet delivered to a consumer."""
    from bench import anchor_app

    with anchor_app.app.connection_for_write() as conn:
        return int(conn.default_channel.queue_declare(queue, passive=True).message_count)
