"""A paused queue with a real worker and a real beat: for a minute, runs keep coming on it
(run now, delayed runs, a recurring task's fires, and runs whose messages were already on the
broker before the pause and reach the worker during it); none starts, none is lost or failed.
Once resumed, every one of them completes, in due order, with the wait in its lateness.

The worker runs one process, so the order runs start in is the order the broker hands them
out. A queue has two lanes (``tasks_app.messaging.queues.lane``): runs due "as soon as possible" (run
now) go to the queue, runs whose instant was set (a delay, a fire) to its due lane, and a
worker takes from both in turn; so the order is checked within each lane."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.conf import settings

from tasks_app import services
from tasks_app.models import QueuePause, Run, RunStatus, Trigger
from tasks_app.runtime import clock
from tests.processes import Proc, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PAUSED_FOR = 60.0  # seconds during which runs keep coming on the paused queue
EVERY = 2.0  # a run now and a delayed run this often, and the recurring task's interval
WAITING = (RunStatus.PENDING, RunStatus.QUEUED)


def started_out_of_order(runs: list[Run]) -> list[str]:
    """The runs (by due instant) that started before one due earlier."""
    ordered = sorted(runs, key=lambda r: (r.due_at, r.created_at))
    return [
        f"{b.trigger} run {b.id} due {b.due_at.isoformat()} started {b.started_at} before "
        f"{a.trigger} run {a.id} due {a.due_at.isoformat()} started {a.started_at}"
        for a, b in zip(ordered, ordered[1:], strict=False)
        if a.started_at and b.started_at and b.started_at < a.started_at
    ]


@pytest.mark.timeout(600)
def test_a_paused_queue_holds_every_run_for_a_minute_and_resuming_runs_them_all_in_order(
    worker_factory: Callable[..., Proc], beat_factory: Callable[..., Proc]
) -> None:
    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    worker_factory(concurrency=1)
    beat = beat_factory()
    on_demand = services.task_create(id="held-on-demand", action="noop")

    # Published before the pause, due in 4 s: the worker holds their messages (ETA) and
    # tries to claim them while the queue is paused.
    early = [services.task_schedule_once(task=on_demand, delay_seconds=4) for _ in range(5)]
    early_ids = [r.id for r in early]
    wait_until(
        lambda: Run.objects.filter(id__in=early_ids, status=RunStatus.QUEUED).count() == 5,
        timeout=10,
        message="the five early runs to be published",
    )
    services.queue_pause(queue=queue, note="downstream down", by="e2e")
    # Their messages reach the worker at their instant: the claim refuses them and they go
    # back to pending at once (nothing else would move them before TASKS_REQUEUE_AFTER_SECONDS).
    wait_until(
        lambda: Run.objects.filter(id__in=early_ids, status=RunStatus.PENDING).count() == 5,
        timeout=15,
        message="the worker to hand the five early runs back",
    )
    recurring = services.task_create(
        id="held-every-2s", action="noop", schedule_type="interval", interval_seconds=int(EVERY)
    )

    made: list[Run] = list(early)
    started = time.monotonic()
    step = 0
    while time.monotonic() - started < PAUSED_FOR:
        made.append(services.task_execute(task=on_demand))  # run now (trigger manual)
        delay = 1 + step % 5
        made.append(services.task_schedule_once(task=on_demand, delay_seconds=delay))
        step += 1
        # Nothing started, finished, failed, skipped or expired, at any moment of the pause.
        moved = Run.objects.filter(task__in=[on_demand, recurring]).exclude(status__in=WAITING)
        assert not moved.exists(), list(moved.values("id", "trigger", "status", "error"))
        time.sleep(EVERY)

    beat.wait_for_log(f"paused queues: {queue}", timeout=5)

    fires = list(Run.objects.filter(task=recurring, trigger=Trigger.SCHEDULE))
    assert len(fires) >= PAUSED_FOR / EVERY - 5, len(fires)  # beat skipped none
    held = Run.objects.filter(id__in=[r.id for r in made])
    assert held.count() == len(made) == 5 + 2 * step  # none lost
    assert set(held.values_list("status", flat=True)) <= set(WAITING)
    assert not held.filter(started_at__isnull=False).exists()
    assert {r.status for r in fires} <= set(WAITING)

    resumed_at: datetime = clock.now()
    assert services.queue_resume(queue=queue, by="e2e") is True
    waiting_ids = [r.id for r in made] + [r.id for r in fires]
    done = Run.objects.filter(id__in=waiting_ids, status=RunStatus.COMPLETED)
    wait_until(
        lambda: done.count() == len(waiting_ids),
        timeout=180,
        message=f"the {len(waiting_ids)} runs held by the pause to complete",
    )
    beat.wait_for_log("paused queues: none", timeout=10)
    assert not QueuePause.objects.exists()

    runs = list(Run.objects.filter(id__in=waiting_ids))
    # Each started with the wait in its lateness: from its due instant, not from the resume.
    for run in runs:
        assert run.started_at is not None and run.started_at >= resumed_at - timedelta(seconds=1)
        if run.due_at < resumed_at:
            waited = (resumed_at - run.due_at).total_seconds() * 1000
            assert run.lateness_ms is not None and run.lateness_ms >= waited - 50, run.id
    first = min(runs, key=lambda r: r.due_at)
    assert first.lateness_ms is not None and first.lateness_ms >= PAUSED_FOR * 1000

    explicit: dict[str, Any] = {r.id: r for r in runs if r.id in {m.id for m in made}}
    run_now = [r for r in explicit.values() if r.trigger == Trigger.MANUAL]
    delayed = [r for r in explicit.values() if r.trigger == Trigger.DELAY]
    assert len(run_now) == step and len(delayed) == step + 5
    assert started_out_of_order(run_now) == []
    assert started_out_of_order(delayed) == []
