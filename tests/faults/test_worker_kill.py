"""kill -9 of the whole worker (main process and pool) twice during a batch of 200 runs with
``max_retries`` 0: every run completes, each effect is made exactly once, and the runs cut
off mid-action are interrupted and run again — recovered from the broker's redelivery within
seconds of the worker's restart, not after the lease's stall window."""

from __future__ import annotations

import time

import pytest

from tasks_app import services
from tasks_app.models import Run, RunStatus
from tests.processes import wait_until

from .conftest import Figures, StartProc
from .helpers import settled, tally

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

RUNS = 200
# Longer than the test: the lease sweep (the backstop) cannot be what recovers the runs.
NO_SWEEP = {"TASKS_STALL_SECONDS": "600"}


def completed(task_id: str) -> int:
    return Run.objects.filter(task_id=task_id, status=RunStatus.COMPLETED).count()


def test_worker_sigkill_twice_interrupts_runs_without_failing_or_duplicating_any(
    fault_worker: StartProc, fault_beat: StartProc, figures: Figures
) -> None:
    fault_beat(**NO_SWEEP)
    worker = fault_worker(concurrency=2, **NO_SWEEP)
    task = services.task_create(
        id="effects", action="test-effect", payload={"seconds": 0.2}, max_retries=0
    )
    for _ in range(RUNS):
        services.task_execute(task=task)

    recoveries: list[float] = []  # from the new worker's "ready" to the runs' completion
    since_kill: list[float] = []  # the same from the kill (includes the worker's start-up)
    interrupted_per_kill: list[int] = []
    for threshold in (RUNS // 4, RUNS // 2):
        wait_until(
            lambda t=threshold: completed(task.id) >= t,
            timeout=120,
            message=f"{threshold} completed runs",
        )
        # Kill while a run is mid-action (its effect made, its outcome not yet recorded).
        wait_until(
            lambda: Run.objects.filter(task=task, status=RunStatus.RUNNING).exists(),
            timeout=10,
            interval=0.01,
            message="a running run",
        )
        killed = time.monotonic()
        worker.kill()  # SIGKILL to the main process and every pool child
        cut_off = list(
            Run.objects.filter(task=task, status=RunStatus.RUNNING).values_list("id", flat=True)
        )
        interrupted_per_kill.append(len(cut_off))
        worker = fault_worker(concurrency=2, **NO_SWEEP)
        restarted = time.monotonic()
        # Recovered: each run cut off was interrupted and its next attempt has completed.
        wait_until(
            lambda ids=cut_off: (
                Run.objects.filter(first_attempt_id__in=ids, status=RunStatus.COMPLETED).count()
                == len(ids)
            ),
            timeout=60,
            message="the interrupted runs to run again and complete",
        )
        recoveries.append(round(time.monotonic() - restarted, 2))
        since_kill.append(round(time.monotonic() - killed, 2))
        cut = list(Run.objects.filter(id__in=cut_off))
        assert all(r.status == RunStatus.INTERRUPTED for r in cut), [r.status for r in cut]
        assert all("died while running it" in r.error for r in cut), [r.error for r in cut]

    wait_until(lambda: settled(task, RUNS), timeout=180, interval=0.5, message="every run to end")
    result = tally(task)
    assert result.requested == RUNS
    assert result.completed == RUNS  # every run ended completed (on a new attempt if cut off)
    assert not Run.objects.filter(task=task, status=RunStatus.FAILED).exists()
    assert result.effects == RUNS and result.lost == 0
    assert result.duplicated == 0
    assert result.attempts_executed_twice == 0  # the claim let no run row start twice
    interrupted = Run.objects.filter(task=task, status=RunStatus.INTERRUPTED).count()
    assert sum(interrupted_per_kill) >= 1  # the kills did cut runs off mid-action
    assert interrupted == sum(interrupted_per_kill)
    # Only a run cut off mid-action ran its action again (as a new attempt), once.
    assert result.re_executions <= interrupted
    for seconds in recoveries:
        assert seconds < 30  # generous; the figures report the real values
    figures(
        runs=RUNS,
        kills=2,
        completed=result.completed,
        failed=0,
        lost=result.lost,
        duplicated=result.duplicated,
        effects=result.effects,
        interrupted_mid_run=interrupted_per_kill,
        re_executed=result.re_executions,
        recovered_seconds_after_restart=recoveries,
        recovered_seconds_after_kill=since_kill,
    )
