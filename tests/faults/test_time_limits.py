"""Time limits: a run over its limit is failed "timed out after N s" and the worker keeps
serving — at the soft limit (the action is interrupted) and at the hard limit (the pool
kills the process; the worker's main process records the run)."""

from __future__ import annotations

import time

import pytest

from tasks_app import services
from tasks_app.models import Run, RunStatus
from tests.processes import wait_until

from .conftest import Figures, StartProc

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def ended(run: Run) -> Run | None:
    run.refresh_from_db()
    return (
        run if run.status not in (RunStatus.PENDING, RunStatus.QUEUED, RunStatus.RUNNING) else None
    )


def test_soft_limit_fails_the_run_in_time_and_the_worker_keeps_serving(
    fault_worker: StartProc, figures: Figures
) -> None:
    worker = fault_worker(concurrency=1, hostname="limits-soft@%h")
    slow = services.task_create(
        id="slow", action="sleep", payload={"seconds": 10}, timeout_seconds=2
    )
    started = time.monotonic()
    run = services.task_execute(task=slow)

    wait_until(lambda: ended(run), timeout=8, message="the slow run to end")
    took = time.monotonic() - started
    assert run.status == RunStatus.FAILED
    assert run.error == "timed out after 2 s"
    assert took < 5, f"failed after {took:.1f} s"
    assert (run.finished_at - run.started_at).total_seconds() < 3

    # The same single-process worker serves the next run.
    echo = services.task_create(
        id="after-timeout", action="echo", payload={"message": "still here"}
    )
    nxt = services.task_execute(task=echo)
    wait_until(lambda: ended(nxt), timeout=10, message="the next run")
    assert nxt.status == RunStatus.COMPLETED and nxt.output == "still here"
    assert nxt.worker == run.worker
    assert worker.popen.poll() is None
    figures(limit_s=2, failed_after_s=round(took, 2), next_run="completed")


def test_hard_limit_kill_still_records_the_timeout(
    fault_worker: StartProc, figures: Figures
) -> None:
    """The action swallows its soft limit; 5 s later the pool kills the process. No beat
    runs here: the worker's main process records the run, not the stall sweep."""
    worker = fault_worker(concurrency=1, hostname="limits-hard@%h")
    stubborn = services.task_create(
        id="stubborn", action="test-ignore-soft-limit", payload={"seconds": 60}, timeout_seconds=1
    )
    started = time.monotonic()
    run = services.task_execute(task=stubborn)

    wait_until(lambda: ended(run), timeout=15, message="the stubborn run to end")
    took = time.monotonic() - started
    assert run.status == RunStatus.FAILED
    assert run.error.startswith("timed out after 1 s"), run.error
    assert took < 10, f"recorded after {took:.1f} s"

    echo = services.task_create(id="after-kill", action="echo", payload={"message": "replaced"})
    nxt = services.task_execute(task=echo)
    wait_until(lambda: ended(nxt), timeout=15, message="the next run")
    assert nxt.status == RunStatus.COMPLETED
    assert worker.popen.poll() is None
    assert "Hard time limit (6s) exceeded" in worker.log()
    figures(limit_s=1, hard_limit_s=6, failed_after_s=round(took, 2), next_run="completed")
