"""A run whose action kills its own process: Celery requeues the message (worker lost), the
claim ignores the redelivery, the lease lapses and beat's sweep retries the run — up to its
limit, then it is failed. No infinite redelivery loop."""

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


def test_self_killing_run_is_retried_to_its_limit_then_failed(
    fault_worker: StartProc, fault_beat: StartProc, figures: Figures
) -> None:
    worker = fault_worker()
    fault_beat()
    task = services.task_create(
        id="suicidal", action="test-kill-self", payload={}, max_retries=2, retry_backoff_seconds=1
    )
    started = time.monotonic()
    first = services.task_execute(task=task)

    wait_until(lambda: settled(task, 1), timeout=60, message="the attempts to run out")
    took = time.monotonic() - started
    attempts = chains(task)[first.id]
    assert [a.attempt for a in attempts] == [1, 2, 3]
    assert [a.status for a in attempts] == [
        RunStatus.RETRYING,
        RunStatus.RETRYING,
        RunStatus.FAILED,
    ]
    assert all(a.trigger == Trigger.RETRY for a in attempts[1:])
    assert all(a.error.startswith("worker lost:") for a in attempts), [a.error for a in attempts]
    # Each attempt executed exactly once, although each message was redelivered.
    assert Execution.objects.count() == 3
    # The redelivered messages are acknowledged and ignored (the last may land just after
    # the run was settled by the sweep).
    wait_until(
        lambda: worker.log().count("message ignored") >= 3,
        timeout=15,
        message="three redelivered messages to be ignored",
    )

    # Nothing more happens once the sweep has had a stall window past the last attempt: no
    # fourth attempt, no re-execution.
    last_end = attempts[-1].finished_at
    assert last_end is not None
    wait_for_beat_after(last_end + timedelta(seconds=STALL_SECONDS + 2), timeout=STALL_SECONDS + 30)
    assert Execution.objects.count() == 3
    assert len(chains(task)[first.id]) == 3

    echo = services.task_create(id="survivor", action="echo", payload={"message": "ok"})
    nxt = services.task_execute(task=echo)
    wait_until(
        lambda: Run.objects.get(pk=nxt.pk).status == RunStatus.COMPLETED,
        timeout=15,
        message="the worker to keep serving",
    )
    figures(
        attempts=3,
        executions=3,
        final="failed",
        seconds_to_failed=round(took, 1),
        stall_window_s=STALL_SECONDS,
    )
