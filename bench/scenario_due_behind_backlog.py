"""Due runs behind a bulk backlog, in the installed project (docs/install.md, from the wheel).

``BACKLOG`` calls of a no-op ``@task`` function are enqueued at once (``enqueue_many``, due
"as soon as possible") on the default queue; one worker (2 processes) and beat start. While
the backlog drains, one call with ``run_after`` = now + 2 s is enqueued every half second
(``CALLS`` of them), and an interval task fires every second on the same queue. Each due
run's lateness is ``started_at - due_at`` from its row; the backlog's drain rate (its runs
started per second, first to last) is compared with the same backlog drained alone in the
same run (the anchor). Run for the queue type of ``TASKS_QUEUE_TYPE`` (``classic`` when
unset; the quorum round runs in a process of its own with ``TASKS_QUEUE_TYPE=quorum`` and its
own queue: a queue cannot change type). ``BENCH_BACKLOG`` sets the backlog (default 20,000).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench import common

BACKLOG = int(os.environ.get("BENCH_BACKLOG", "20000"))
CALLS = 50
DELAY_S = 2.0


def _drain(*, with_due: bool) -> dict[str, Any]:
    from django.db.models import Max, Min
    from django.utils import timezone

    from bench.enqueue_functions import noop
    from tasks_app import services
    from tasks_app.django_tasks import enqueue_many
    from tasks_app.models import Run, RunStatus, Trigger

    common.reset_tables()
    enqueue_many(noop, [((i,), {}) for i in range(BACKLOG)])
    with common.processes() as procs:
        # Beat runs in both rounds (like with like); the interval task only beside due runs.
        procs.append(
            common.start_worker(shape="installed", queue=os.environ["TASKS_DEFAULT_QUEUE"])
        )
        if with_due:
            services.task_create(
                id="due-interval", action="noop", schedule_type="interval", interval_seconds=1
            )
        procs.append(common.start_beat(shape="installed"))
        watched_from = timezone.now()
        calls: list[str] = []
        backlog = Run.objects.filter(trigger=Trigger.ENQUEUE, due_at__lte=timezone.now())
        if with_due:
            for _ in range(CALLS):
                run_after = timezone.now() + timedelta(seconds=DELAY_S)
                calls.append(noop.using(run_after=run_after).enqueue(-1).id)
                time.sleep(0.5)
        finished = Run.objects.filter(status=RunStatus.COMPLETED)
        common.wait_until(
            lambda: (
                finished.filter(id__in=calls).count() == len(calls)
                and not backlog.exclude(status=RunStatus.COMPLETED).exists()
            ),
            timeout=3600,
            interval=1,
        )
    span = backlog.aggregate(first=Min("started_at"), last=Max("started_at"))
    seconds = (span["last"] - span["first"]).total_seconds()
    result: dict[str, Any] = {
        "backlog": BACKLOG,
        "backlog_runs_per_s": round((BACKLOG - 1) / seconds, 1),
    }
    if with_due:
        timed = Run.objects.filter(id__in=calls, status=RunStatus.COMPLETED)
        fires = Run.objects.filter(
            trigger=Trigger.SCHEDULE,
            status=RunStatus.COMPLETED,
            due_at__gte=watched_from,
            started_at__lte=span["last"],
        )
        result["run_after_lateness_ms"] = common.percentiles([r.lateness_ms for r in timed])
        result["interval_fire_lateness_ms"] = common.percentiles([r.lateness_ms for r in fires])
        # Started while the backlog still waited: the case the scenario is about.
        result["run_after_started_before_backlog_end"] = timed.filter(
            started_at__lt=span["last"]
        ).count()
    return result


def measure() -> dict[str, Any]:
    alone = _drain(with_due=False)
    beside = _drain(with_due=True)
    return {
        "queue_type": os.environ.get("TASKS_QUEUE_TYPE") or "classic",
        "backlog_alone": alone,
        "backlog_with_due_runs": beside,
        "drain_rate_ratio": common.ratio(beside["backlog_runs_per_s"], alone["backlog_runs_per_s"]),
    }


def run(results_dir: Path) -> dict[str, Any]:
    rounds = [measure()]
    # The quorum round: a process of its own, its own queue (settings are read at start).
    env = {
        **os.environ,
        "TASKS_QUEUE_TYPE": "quorum",
        "TASKS_DEFAULT_QUEUE": f"{common.QUEUE}-quorum",
    }
    done = subprocess.run(
        [sys.executable, "-m", "bench.scenario_due_behind_backlog"],
        cwd=common.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode == 0:
        rounds.append(json.loads(done.stdout.strip().splitlines()[-1]))
    else:
        rounds.append({"queue_type": "quorum", "error": done.stderr[-2000:]})
    common.delete_queues(f"{common.QUEUE}-quorum")
    result = {
        "scenario": "due_behind_backlog",
        "project": "docs/install.md, from the wheel",
        "inputs": {"backlog": BACKLOG, "run_after_calls": CALLS, "delay_s": DELAY_S},
        "rounds": rounds,
        "targets": {"run_after_and_fire_lateness_p99_ms": 1000, "drain_rate_ratio": 0.9},
    }
    return result


if __name__ == "__main__":  # one round, for the queue type of TASKS_QUEUE_TYPE
    import django

    queue = os.environ["TASKS_DEFAULT_QUEUE"]
    common.configure_environment()
    os.environ["TASKS_DEFAULT_QUEUE"] = queue
    django.setup()
    print(json.dumps(measure()))
