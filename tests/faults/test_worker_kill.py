"""kill -9 of the whole worker (main process and pool) twice during a batch of 200 runs:
every run ends, each effect is made exactly once, no run row executes twice."""

from __future__ import annotations

import time

import pytest

from tasks_app import services
from tasks_app.models import Run, RunStatus
from tests.processes import wait_until

from .conftest import STALL_SECONDS, Figures, StartProc
from .helpers import settled, tally

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

RUNS = 200


def completed(task_id: str) -> int:
    return Run.objects.filter(task_id=task_id, status=RunStatus.COMPLETED).count()


def test_worker_sigkill_twice_loses_and_duplicates_nothing(
    fault_worker: StartProc, fault_beat: StartProc, figures: Figures
) -> None:
    fault_beat()
    worker = fault_worker(concurrency=2)
    task = services.task_create(
        id="effects",
        action="test-effect",
        payload={"seconds": 0.2},
        max_retries=3,
        retry_backoff_seconds=1,
    )
    for _ in range(RUNS):
        services.task_execute(task=task)

    recoveries: list[float] = []
    interrupted_total = 0
    interrupted_per_kill: list[int] = []
    for threshold in (RUNS // 4, RUNS // 2):
        wait_until(
            lambda t=threshold: completed(task.id) >= t,
            timeout=90,
            message=f"{threshold} completed runs",
        )
        # Kill while a run is mid-action (its effect made, its outcome not yet recorded).
        wait_until(
            lambda: Run.objects.filter(task=task, status=RunStatus.RUNNING).exists(),
            timeout=10,
            interval=0.01,
            message="a running run",
        )
        worker.kill()  # SIGKILL to the main process and every pool child
        killed_at = time.monotonic()
        interrupted = list(
            Run.objects.filter(task=task, status=RunStatus.RUNNING).values_list("id", flat=True)
        )
        interrupted_per_kill.append(len(interrupted))
        interrupted_total += len(interrupted)
        worker = fault_worker(concurrency=2)
        # The runs cut off mid-action are noticed (lease lapsed) and retried by beat's sweep.
        wait_until(
            lambda ids=interrupted: (
                not Run.objects.filter(id__in=ids, status=RunStatus.RUNNING).exists()
            ),
            timeout=30,
            message="the interrupted runs to be recovered",
        )
        recoveries.append(round(time.monotonic() - killed_at, 1))

    wait_until(lambda: settled(task, RUNS), timeout=120, interval=0.5, message="every run to end")
    result = tally(task)
    assert result.requested == RUNS
    assert result.completed == RUNS  # every run ended completed (on a retry if it was cut off)
    assert result.effects == RUNS and result.lost == 0
    assert result.duplicated == 0
    assert result.attempts_executed_twice == 0  # the claim let no run row start twice
    # Only a run cut off mid-action ran its action again (as a new attempt), once.
    assert result.re_executions <= interrupted_total
    assert result.retried <= interrupted_total
    assert interrupted_total >= 1  # the kills did cut runs off mid-action
    for recovery_s in recoveries:
        assert recovery_s < 3 * STALL_SECONDS + 10
    figures(
        runs=RUNS,
        kills=2,
        lost=result.lost,
        duplicated=result.duplicated,
        effects=result.effects,
        interrupted_mid_run=interrupted_per_kill,
        re_executed_as_retry=result.re_executions,
        recovery_seconds=recoveries,
    )
