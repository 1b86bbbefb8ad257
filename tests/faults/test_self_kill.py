"""A run whose action kills its own process (a poison pill): Celery requeues the message
(worker lost), the redelivery finds the run's executor gone and interrupts it, and the new
attempt kills its process again — until ``TASKS_MAX_INTERRUPTIONS``, then the run fails,
whatever ``max_retries`` says. No infinite redelivery loop, and the worker keeps serving."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from tasks_app import services
from tasks_app.models import Run, RunStatus, Trigger
from tests.effects.models import Execution
from tests.processes import wait_for_beat_after, wait_until

from .conftest import STALL_SECONDS, Figures, StartProc
from .helpers import chains, settled

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_self_killing_run_is_interrupted_to_the_limit_then_failed(
    fault_worker: StartProc, fault_beat: StartProc, figures: Figures
) -> None:
    fault_worker()
    fault_beat()
    task = services.task_create(
        id="suicidal", action="test-kill-self", payload={}, max_retries=2, retry_backoff_seconds=1
    )
    started = time.monotonic()
    first = services.task_execute(task=task)

    wait_until(lambda: settled(task, 1), timeout=60, message="the attempts to run out")
    took = time.monotonic() - started
    attempts = chains(task)[first.id]
    assert [a.attempt for a in attempts] == [1, 2, 3, 4]
    assert [a.status for a in attempts] == [
        RunStatus.INTERRUPTED,
        RunStatus.INTERRUPTED,
        RunStatus.INTERRUPTED,
        RunStatus.FAILED,
    ]
    assert [a.interruptions for a in attempts] == [0, 1, 2, 3]
    assert all(a.trigger == Trigger.RETRY for a in attempts[1:])
    assert attempts[-1].error.startswith("interrupted 4 times (TASKS_MAX_INTERRUPTIONS is 3)")
    # Each attempt executed exactly once, although each message was redelivered.
    assert Execution.objects.count() == 4

    # Nothing more happens once the sweep has had a stall window past the last attempt: no
    # fourth attempt, no re-execution.
    last_end = attempts[-1].finished_at
    assert last_end is not None
    wait_for_beat_after(last_end + timedelta(seconds=STALL_SECONDS + 2), timeout=STALL_SECONDS + 30)
    assert Execution.objects.count() == 4
    assert len(chains(task)[first.id]) == 4

    echo = services.task_create(id="survivor", action="echo", payload={"message": "ok"})
    nxt = services.task_execute(task=echo)
    wait_until(
        lambda: Run.objects.get(pk=nxt.pk).status == RunStatus.COMPLETED,
        timeout=15,
        message="the worker to keep serving",
    )
    figures(
        attempts=4,
        executions=4,
        final="failed",
        seconds_to_failed=round(took, 1),
        stall_window_s=STALL_SECONDS,
    )
