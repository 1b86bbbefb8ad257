"""Scenario 4: worker memory with a large stored backlog vs idle; beat memory and tick time
with 10,000 schedules."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from bench import common
from bench.beat_throughput import setup_owned, start_drainer

SIZES = {
    "full": {"backlog": 1_000_000, "schedules": 10_000, "beat_s": 60, "settle_s": 20},
    "quick": {"backlog": 50_000, "schedules": 2_000, "beat_s": 20, "settle_s": 8},
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
        "ratios": {"worker_rss_backlog_vs_idle": common.ratio(loaded, idle)},
        "targets": {"worker_rss_backlog_vs_idle_max": 1.10},
    }
