"""Scenario 1: start lateness of near runs behind a backlog of far-future runs.

Ours: ``backlog`` pending runs due 1-30 days ahead (spread over 10,000 tasks), then ``near``
runs created at ~``rate``/s through the service layer with delays of 1-60 s, executed by a
2-process worker while our beat releases them. Lateness is ``started_at - due_at`` taken at
the claim. Anchors on the same broker, same run: plain Celery ``countdown`` (1,000 tasks due
tomorrow ahead of 100 due now, default prefetch) and Celery native delayed delivery (quorum
queue; ``native_far`` tasks due tomorrow in the broker, then the same arrivals as ours:
``near`` tasks published at ~``rate``/s, each due 1-60 s after its publish, the same delays
from the same seed, on a 2-process worker).
"""

from __future__ import annotations

import bisect
import os
import random
import re
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import redis

from bench import common

SIZES = {
    "full": {
        "backlog": 1_000_000,
        "near": 12_000,
        "rate": 200,
        "far_countdown": 1000,
        "now_countdown": 100,
        "native_far": 100_000,
    },
    "quick": {
        "backlog": 50_000,
        "near": 1_500,
        "rate": 100,
        "far_countdown": 300,
        "now_countdown": 50,
        "native_far": 5_000,
    },
}


def arrive(n: int, rate: float, emit: Callable[[int, float], Any]) -> int:
    """Call ``emit(i, delay_s)`` ``n`` times at about ``rate`` a second, each with a delay
    of 1-60 s drawn from one seeded generator: ours and the native anchor get the same
    arrivals. Returns ``n``."""
    rng, started, sent = random.Random(4), time.monotonic(), 0
    while sent < n:
        target = min(int((time.monotonic() - started) * rate), n)
        while sent < target:
            emit(sent, rng.uniform(1, 60))
            sent += 1
        time.sleep(0.005)
    return sent


def run(results_dir: Path, *, quick: bool = False) -> dict[str, Any]:
    size = SIZES["quick" if quick else "full"]
    ours = _guarded(measure_ours, size)
    countdown = _guarded(measure_countdown_anchor, size)
    native = _guarded(measure_native_anchor, size)
    return {
        "scenario": "lateness",
        "inputs": size,
        "ours": ours,
        "anchor_countdown": countdown,
        "anchor_native_delayed": native,
        "ratios": {
            "p50_vs_countdown": common.ratio(
                ours["lateness_ms"]["p50"], countdown["lateness_ms"]["p50"]
            ),
            "p99_vs_countdown": common.ratio(
                ours["lateness_ms"]["p99"], countdown["lateness_ms"]["p99"]
            ),
            "p50_vs_native": common.ratio(ours["lateness_ms"]["p50"], native["lateness_ms"]["p50"]),
            "p99_vs_native": common.ratio(ours["lateness_ms"]["p99"], native["lateness_ms"]["p99"]),
        },
        "targets": {"p50_ms": 5, "p99_ms": 50, "early": 0, "lost": 0, "p99_vs_native": 1.5},
        "samples_ms": {
            "ours": ours.pop("samples"),
            "countdown": countdown.pop("samples"),
            "native": native.pop("samples"),
        },
    }


def _guarded(measure: Any, size: dict[str, int]) -> dict[str, Any]:
    """One part failing (e.g. an anchor) must not lose the other parts' figures."""
    import traceback

    try:
        return dict(measure(size))
    except Exception:
        return {
            "error": traceback.format_exc()[-2000:],
            "lateness_ms": common.percentiles([]),
            "samples": [],
            "lost": None,
            "early": None,
        }


def measure_ours(size: dict[str, int]) -> dict[str, Any]:
    from django.utils import timezone

    from tasks_app.models import Run, RunStatus, Task, Trigger
    from tasks_app.services import run_create

    common.reset_tables()
    far_tasks = common.create_tasks("far", 10_000)
    near_tasks = common.create_tasks("near", 1_000)
    insert_s = common.insert_future_runs(size["backlog"], tasks=far_tasks)
    tasks = list(Task.objects.filter(id__in=near_tasks))
    with common.processes() as procs:
        procs.append(common.start_worker(shape="installed"))
        procs.append(common.start_beat(shape="installed"))
        time.sleep(3)
        started = time.monotonic()

        def create(i: int, delay_s: float) -> None:
            now = timezone.now()
            run_create(
                task=tasks[i % len(tasks)],
                trigger=Trigger.DELAY,
                due_at=now + timedelta(seconds=delay_s),
                now=now,
            )

        created = arrive(size["near"], size["rate"], create)
        produce_s = time.monotonic() - started
        near = Run.objects.filter(task_id__in=near_tasks)
        common.wait_until(
            lambda: (
                not near.filter(
                    status__in=[RunStatus.PENDING, RunStatus.QUEUED, RunStatus.RUNNING]
                ).exists()
            ),
            timeout=60 + 60,
            interval=1,
        )
        worker_rss = procs[0].rss_mb()
        worker_log = procs[0].log()
        received = _received_instants(worker_log)
    # In due order, so the JSON's samples show when in the minute the late runs fell.
    completed = list(
        near.filter(status=RunStatus.COMPLETED)
        .order_by("due_at")
        .values_list("id", "due_at", "queued_at", "started_at", "finished_at", "lateness_ms")
    )
    lateness = [row[5] for row in completed]
    causes = late_causes(completed, received, threshold_ms=LATE_MS)
    if os.environ.get("BENCH_PROBE") == "1":
        causes["probe"] = probe_split(
            list(near.filter(status=RunStatus.COMPLETED).values_list("id", "due_at", "started_at")),
            worker_log,
        )
    statuses = dict((s, near.filter(status=s).count()) for s in RunStatus.values)
    backlog_left = Run.objects.filter(task_id__in=far_tasks, status=RunStatus.PENDING).count()
    common.reset_tables()
    return {
        "backlog_insert_s": insert_s,
        "produce_s": round(produce_s, 1),
        "created": created,
        "completed": len(lateness),
        "lost": created - len(lateness),
        "early": sum(1 for x in lateness if x < 0),
        "statuses": {k: v for k, v in statuses.items() if v},
        "backlog_still_pending": backlog_left,
        "worker_rss_mb": worker_rss,
        "lateness_ms": common.percentiles(lateness),
        "late_causes": causes,
        "samples": lateness,
    }


# A run later than this (the p99 target) is "late" and gets a cause.
LATE_MS = 5.0
_RECEIVED = re.compile(r"Task tasks_app\.execute_run\[([0-9a-f-]{36})\] received")


def _received_instants(log: str) -> dict[str, float]:
    """Run id -> epoch seconds at which the worker's main process got its message (Celery's
    "received" line; millisecond resolution)."""
    found = {}
    for line in log.splitlines():
        match = _RECEIVED.search(line)
        if match:
            at = common.log_timestamp(line)
            if at is not None:
                found.setdefault(match.group(1), at)
    return found


_PROBE = re.compile(r"probe (fired|began) ([0-9a-f-]{36}) ([0-9.]+)")


def probe_split(runs: list[tuple[Any, ...]], log: str) -> dict[str, Any]:
    """Where each run's start time went (``BENCH_PROBE=1``, bench/probe.py): ``timer`` = the
    main process's ETA timer firing after the due instant; ``handover`` = from there until a
    pool process began the run; ``child`` = from there to the claim's ``started_at``.
    Percentiles over every run and over the runs later than ``LATE_MS``."""
    seen: dict[str, dict[str, float]] = {}
    for kind, run_id, at in _PROBE.findall(log):
        seen.setdefault(run_id, {}).setdefault(kind, float(at))
    parts: dict[str, dict[str, list[float]]] = {"all": {}, "late": {}}
    for run_id, due, started in runs:
        probe = seen.get(str(run_id), {})
        if "fired" not in probe or "began" not in probe or started is None:
            continue
        split = {
            "timer": (probe["fired"] - due.timestamp()) * 1000,
            "handover": (probe["began"] - probe["fired"]) * 1000,
            "child": (started.timestamp() - probe["began"]) * 1000,
        }
        late = (started - due).total_seconds() * 1000 > LATE_MS
        for group in ("all", "late") if late else ("all",):
            for name, value in split.items():
                parts[group].setdefault(name, []).append(value)
    return {
        group: {name: common.percentiles(values) for name, values in split.items()}
        for group, split in parts.items()
    }


def late_causes(
    runs: list[tuple[Any, ...]], received: dict[str, float], *, threshold_ms: float
) -> dict[str, Any]:
    """Each run later than ``threshold_ms``, by the first cause that explains it, from its
    instants (due, queued, received by the worker, started at the claim):

    - ``released_late``: beat published it after it was due;
    - ``received_late``: the worker got the message after it was due (broker, or a main
      process busy elsewhere);
    - ``pool_busy``: at its due instant both pool processes were executing other runs;
    - ``worker_slack``: none of those — the time went between the ETA timer and the claim
      (the main process handing it to an idle child, process wake-ups under CPU contention,
      garbage collection).
    """
    spans = sorted((r[3].timestamp(), r[4].timestamp()) for r in runs if r[3] and r[4])
    starts = [a for a, _ in spans]
    groups: dict[str, list[float]] = {}
    examples = []
    for run_id, due, queued, _started, _finished, late in runs:
        if late is None or late <= threshold_ms:
            continue
        due_s = due.timestamp()
        got = received.get(str(run_id))
        if queued is not None and queued.timestamp() > due_s:
            cause = "released_late"
        elif got is not None and got > due_s + 0.001:  # the log's millisecond resolution
            cause = "received_late"
        else:
            upto = bisect.bisect_right(starts, due_s)
            busy = sum(1 for a, b in spans[max(0, upto - 200) : upto] if a <= due_s < b)
            cause = "pool_busy" if busy >= 2 else "worker_slack"
        groups.setdefault(cause, []).append(late)
        examples.append(
            {
                "late_ms": round(late, 2),
                "cause": cause,
                "queued_ms": round((queued.timestamp() - due_s) * 1000, 1) if queued else None,
                "received_ms": round((got - due_s) * 1000, 1) if got else None,
                "due": due.isoformat(timespec="milliseconds"),
            }
        )
    examples.sort(key=lambda e: -e["late_ms"])
    return {
        "threshold_ms": threshold_ms,
        "late": sum(len(v) for v in groups.values()),
        "of": len(runs),
        "by_cause": {
            cause: {"runs": len(v), "p50_ms": common.percentiles(v)["p50"], "max_ms": max(v)}
            for cause, v in sorted(groups.items(), key=lambda kv: -len(kv[1]))
        },
        "latest": examples[:15],
    }


def _anchor_env(mode: str, queue: str, key: str) -> dict[str, str]:
    return {"ANCHOR_MODE": mode, "ANCHOR_QUEUE": queue, "ANCHOR_KEY": key}


def _collect(key: str, expected: int, timeout: float) -> list[float]:
    store = redis.Redis.from_url(common.os.environ["REDIS_URL"])
    common.wait_until(lambda: store.llen(key) >= expected, timeout=timeout, interval=0.5)
    values = [float(v) for v in store.lrange(key, 0, -1)]
    store.delete(key)
    return values


def measure_countdown_anchor(size: dict[str, int]) -> dict[str, Any]:
    import os

    queue, key = f"bench-anchor-countdown-{os.getpid()}", f"bench:countdown:{os.getpid()}"
    env = _anchor_env("classic", queue, key)
    os.environ.update(env)
    from bench import anchor_app

    anchor_app.app.conf.task_default_queue = queue
    # Bounded: plain Celery took 86-181 s here to start these (the 86 s); a task not
    # started by then is reported as such, its lateness only known to exceed the bound.
    timeout = 420
    try:
        with anchor_app.app.producer_or_acquire() as producer:
            for _ in range(size["far_countdown"]):
                anchor_app.anchor.apply_async(
                    (time.time() + 86400,), countdown=86400, queue=queue, producer=producer
                )
            for _ in range(size["now_countdown"]):
                anchor_app.anchor.apply_async((time.time(),), queue=queue, producer=producer)
        with common.processes() as procs:
            procs.append(
                common.start_worker(
                    app="bench.anchor_app", queue=queue, name="anchor-countdown", **env
                )
            )
            values = _collect(key, size["now_countdown"], timeout)
    finally:
        common.delete_queues(queue)
    return {
        "mode": "plain Celery countdown, default prefetch, -c 2",
        "started": len(values),
        "expected": size["now_countdown"],
        "timeout_s": timeout,
        "not_started_in_time": size["now_countdown"] - len(values),
        "lateness_ms": common.percentiles(values),
        "samples": values,
    }


def measure_native_anchor(size: dict[str, int]) -> dict[str, Any]:
    import os
    import subprocess
    import sys

    queue, key = f"bench-anchor-native-{os.getpid()}", f"bench:native:{os.getpid()}"
    env = _anchor_env("native", queue, key)
    if not os.environ["CELERY_BROKER_URL"].endswith(f"/{common.BENCH_VHOST}"):
        return {
            "skipped": "no private vhost: native delayed delivery exchanges are global",
            "lateness_ms": common.percentiles([]),
            "samples": [],
        }
    script = f"""
import time
from datetime import UTC, datetime
from bench import anchor_app
from bench.lateness import arrive
far, near, rate = {size["native_far"]}, {size["near"]}, {size["rate"]}
app = anchor_app.app
fast = app.connection_for_write(transport_options={{'confirm_publish': False}})
with app.producer_or_acquire(app.amqp.Producer(fast)) as p:
    for i in range(far):
        anchor_app.anchor.apply_async((time.time() + 86400,), countdown=86400, producer=p)
fast.release()
# The same arrivals as ours (bench.lateness.arrive): each due 1-60 s after it is published
# (native delayed delivery needs at least 1 s).
with app.producer_or_acquire() as p:
    def publish(i, delay_s):
        due = time.time() + delay_s
        anchor_app.anchor.apply_async((due,), eta=datetime.fromtimestamp(due, UTC), producer=p)
    arrive(near, rate, publish)
print('published', far, near, flush=True)
"""
    try:
        with common.processes() as procs:
            procs.append(
                common.start_worker(
                    app="bench.anchor_app", queue=queue, name="anchor-native", **env
                )
            )
            started = time.monotonic()
            subprocess.run(
                [sys.executable, "-c", script],
                env={**os.environ, **env},
                cwd=common.ROOT,
                check=True,
                timeout=900,
            )
            publish_s = time.monotonic() - started
            values = _collect(key, size["near"], 60 + 60)
    finally:
        common.delete_queues(queue)
    return {
        "mode": "Celery native delayed delivery (quorum queue, topic exchange, confirm_publish), -c 2",
        "publish_s": round(publish_s, 1),  # the far tasks, then the near ones at the rate
        "started": len(values),
        "expected": size["near"],
        "lateness_ms": common.percentiles(values),
        "samples": values,
    }
