"""Hand-made django-celery-beat entries: how soon beat obeys an edit that makes an entry fire
sooner, under ours (``TaskScheduler``) and stock ``DatabaseScheduler``, same edits, same run.

An entry no task owns is fired the stock way by both schedulers; what differs is how often
each looks at django-celery-beat's "changed" row. Four edits, each on an entry that would
otherwise not fire for a day: a **new** entry every second; **re-enabling** a disabled one;
a **shorter interval** (one hour to one second); an **earlier start** (start time tomorrow
moved to now). Each edit is made through the ORM as the admin makes it (django-celery-beat's
signal marks the change), at a random moment of beat's tick; the figure is the time from the
edit's commit to the first ``Sending due task`` line for that entry in beat's log.

The tick's own cost does not depend on this: the check is one primary-key read of the
"changed" row, and a change reloads the entries no task owns (owned schedules are never
loaded; ``tasks_app.beat.scheduler``). ``owned`` recurring schedules are stored beside the
hand-made entries to show that.
"""

from __future__ import annotations

import random
import re
import statistics
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench import common

SCHEDULERS = {"ours": None, "stock": "django_celery_beat.schedulers:DatabaseScheduler"}
KINDS = ("new", "re-enabled", "shorter interval", "earlier start")
SIZES = {"full": {"rounds": 5, "owned": 10_000}, "quick": {"rounds": 2, "owned": 1_000}}
QUEUE = "bench-stock-edits"
TIMEOUT_S = 30.0


def _every(seconds: int) -> Any:
    from django_celery_beat.models import IntervalSchedule

    return IntervalSchedule.objects.get_or_create(every=seconds, period=IntervalSchedule.SECONDS)[0]


def _prepare(kind: str, name: str) -> Any:
    """An entry that will not fire for a day, loaded by beat before the edit."""
    from django.utils import timezone
    from django_celery_beat.models import PeriodicTask

    fields: dict[str, Any] = {"name": name, "task": "bench.noop", "queue": QUEUE}
    if kind == "re-enabled":
        return PeriodicTask.objects.create(**fields, interval=_every(1), enabled=False)
    if kind == "shorter interval":
        return PeriodicTask.objects.create(**fields, interval=_every(86_400))
    if kind == "earlier start":
        tomorrow = timezone.now() + timedelta(days=1)
        return PeriodicTask.objects.create(**fields, interval=_every(1), start_time=tomorrow)
    return None


def _edit(kind: str, name: str, entry: Any) -> None:
    from django.utils import timezone
    from django_celery_beat.models import PeriodicTask

    if kind == "new":
        PeriodicTask.objects.create(name=name, task="bench.noop", queue=QUEUE, interval=_every(1))
    elif kind == "re-enabled":
        entry.enabled = True
        entry.save()
    elif kind == "shorter interval":
        entry.interval = _every(1)
        entry.save()
    else:
        entry.start_time = timezone.now() - timedelta(seconds=1)
        entry.save()


def _first_send(beat: common.Proc, name: str, after: float) -> float | None:
    pattern = re.compile(rf"Sending due task {re.escape(name)} ")
    for line in beat.log().splitlines():
        if pattern.search(line) and (at := common.log_timestamp(line)) and at >= after - 0.01:
            return at
    return None


def measure(scheduler: str | None, *, rounds: int, seed: int) -> dict[str, Any]:
    from django_celery_beat.models import PeriodicTask

    rng = random.Random(seed)
    seen: dict[str, list[float]] = {kind: [] for kind in KINDS}
    missed: dict[str, int] = dict.fromkeys(KINDS, 0)
    with common.processes() as procs:
        beat = common.start_beat(scheduler=scheduler, name="beat-edits")
        procs.append(beat)
        time.sleep(3)  # past start-up: the first load of the entries is done
        for i in range(rounds):
            for kind in KINDS:
                name = f"edit-{kind.replace(' ', '-')}-{i}"
                entry = _prepare(kind, name)
                time.sleep(2 + rng.random())  # beat has loaded the entry, and we are mid-tick
                _edit(kind, name, entry)
                edited = time.time()
                sent = common.wait_until(
                    lambda n=name, t=edited: _first_send(beat, n, t),
                    timeout=TIMEOUT_S,
                    interval=0.05,
                )
                if sent:
                    seen[kind].append(round(sent - edited, 3))
                else:
                    missed[kind] += 1
                PeriodicTask.objects.filter(name=name).delete()
    return {
        kind: {
            "n": len(v),
            "median_s": round(statistics.median(v), 3) if v else None,
            "max_s": max(v) if v else None,
            "not_seen_in_30_s": missed[kind],
        }
        for kind, v in seen.items()
    }


def run(results_dir: Path, *, quick: bool = False) -> dict[str, Any]:
    from bench.beat_throughput import setup_owned
    from tasks_app.conf import app_settings

    size = SIZES["quick" if quick else "full"]
    common.reset_tables()
    # Owned schedules beside the entries (due in an hour): never loaded by ours, on either side.
    setup_owned(size["owned"], 3600, time.time() + 3600)
    result: dict[str, Any] = {}
    try:
        for side, scheduler in SCHEDULERS.items():
            result[side] = measure(scheduler, rounds=size["rounds"], seed=7)
    finally:
        common.delete_queues(QUEUE)
        common.reset_tables()
    worst = {
        side: max((k["max_s"] or TIMEOUT_S for k in kinds.values()), default=None)
        for side, kinds in result.items()
    }
    return {
        "scenario": "stock_edits",
        "inputs": {
            **size,
            "stock_check_s": app_settings.BEAT_STOCK_CHECK_SECONDS,
            "tick_s": app_settings.BEAT_TICK_SECONDS,
        },
        "edit_to_first_send": result,
        "worst_s": worst,
        "ratio_worst_ours_to_stock": common.ratio(worst["ours"], worst["stock"]),
    }
