"""A worker of the installed project (docs/install.md, from the wheel) behind a backlog:
priorities order the queue, and a run whose due instant was set does not wait for the
backlog of runs due "as soon as possible"."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tasks_app.django_tasks import enqueue_many
from tasks_app.models import Run, RunStatus
from tests.django_tasks.functions import add
from tests.processes import Proc, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

BACKLOG = 1000


def start_rank(run_id: Any) -> int:
    """How many runs started before run ``run_id`` (0: it was the first)."""
    run = Run.objects.get(id=run_id)
    assert run.status == RunStatus.COMPLETED, run.status
    return Run.objects.filter(started_at__lt=run.started_at).count()


def drain(total: int) -> None:
    wait_until(
        lambda: Run.objects.filter(status=RunStatus.COMPLETED).count() >= total,
        timeout=180,
        interval=0.5,
        message=f"{total} runs to complete",
    )


def test_a_priority_9_run_starts_among_the_first_20_behind_1000_priority_0_runs(
    worker_factory: Callable[..., Proc],
) -> None:
    enqueue_many(add.using(priority=-100), [((i, 0), {}) for i in range(BACKLOG)])  # level 0
    urgent = add.using(priority=100).enqueue(1, 2)  # level 9
    assert Run.objects.get(id=urgent.id).priority == 9

    worker_factory()  # the backlog is all in the queue before anything takes from it
    drain(BACKLOG + 1)
    assert start_rank(urgent.id) < 20


def test_a_run_after_call_starts_on_time_behind_a_backlog_of_now_calls(
    worker_factory: Callable[..., Proc],
) -> None:
    # The same priority on both sides: only the due instant sets the due call apart.
    enqueue_many(add, [((i, 0), {}) for i in range(2 * BACKLOG)])
    worker_factory(concurrency=1)
    due = add.using(run_after=timezone.now() + timedelta(seconds=2)).enqueue(1, 2)

    drain(2 * BACKLOG + 1)
    run = Run.objects.get(id=due.id)
    assert run.lateness_ms is not None and 0 <= run.lateness_ms < 1000
    # It started while most of the backlog still waited.
    assert Run.objects.filter(started_at__gt=run.started_at).count() > 100
