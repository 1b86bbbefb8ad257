"""Scenario 5: kill -9 the leading beat while it fires 10,000 schedules every 10 s; the
standby must fire within 10 s; afterwards 0 duplicates and only catch-up-skipped fires
missing (none if the takeover is shorter than the misfire grace plus the lookahead)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import common
from bench.beat_throughput import duplicate_fires, fires_stats, setup_owned, start_drainer
from tasks_app.conf import app_settings

SIZES = {
    "full": {"schedules": 10_000, "every_s": 10, "before_kill_s": 40, "after_kill_s": 40},
    "quick": {"schedules": 2_000, "every_s": 10, "before_kill_s": 15, "after_kill_s": 20},
}
LEADER = "beat leadership acquired"


def run(results_dir: Path, *, quick: bool = False) -> dict[str, Any]:
    from tasks_app.models import Run

    size = SIZES["quick" if quick else "full"]
    every = size["every_s"]
    common.reset_tables()
    with common.processes() as procs:
        procs.append(start_drainer(common.QUEUE))
        first_at = time.time() + 15
        setup_owned(size["schedules"], every, first_at)
        beats = [common.start_beat(name="beat-a"), common.start_beat(name="beat-b")]
        procs.extend(beats)
        common.wait_until(lambda: any(LEADER in b.log() for b in beats), timeout=30)
        [leader] = [b for b in beats if LEADER in b.log()]
        [standby] = [b for b in beats if b is not leader]
        time.sleep(max(first_at - time.time(), 0) + size["before_kill_s"])
        leader.kill()
        killed = time.time()
        killed_dt = datetime.fromtimestamp(killed, UTC)
        common.wait_until(lambda: LEADER in standby.log(), timeout=30, interval=0.05)
        took_over = time.time()
        common.wait_until(
            lambda: Run.objects.filter(created_at__gt=killed_dt).exists(), timeout=30, interval=0.05
        )
        first_fire_after = time.time()
        time.sleep(size["after_kill_s"])
        standby.stop()
    window = (first_at, killed + size["after_kill_s"] - 6)
    stats = fires_stats(window, every, size["schedules"])
    dupes = duplicate_fires()
    grace = app_settings.MISFIRE_GRACE_SECONDS
    common.reset_tables()
    return {
        "scenario": "failover",
        "inputs": {
            **size,
            "misfire_grace_s": grace,
            "horizon_s": app_settings.RELEASE_HORIZON_SECONDS,
        },
        "ours": {
            "takeover_s": round(took_over - killed, 2),
            "first_fire_by_standby_s": round(first_fire_after - killed, 2),
            "duplicates": dupes,
            **stats,
        },
        "targets": {
            "first_fire_by_standby_s_max": 10,
            "duplicates": 0,
            "missed": "only fires older than the grace at takeover (catch-up skip)",
        },
    }
