"""A deploy: SIGTERM to the worker's whole process group, SIGKILL 10 s later if it is still
there (what a PaaS does), then a new worker. Runs finish within the worker's shutdown grace
(``TASKS_SHUTDOWN_GRACE_SECONDS``); those that cannot are handed back and run again on the
new worker as interruptions. No run fails, none is lost, no effect is made twice."""

from __future__ import annotations

import signal
import time

import pytest

from tasks_app import services
from tasks_app.models import Run, RunStatus
from tests.processes import wait_until

from .conftest import Figures, StartProc
from .helpers import settled, tally

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PLATFORM_GRACE_SECONDS = 10  # SIGTERM, then SIGKILL after this long (Heroku: 30 s)


def deploy(
    fault_worker: StartProc, *, runs: int, seconds: float, grace: float
) -> tuple[dict[str, object], object]:
    """``runs`` runs of ``seconds`` each; SIGTERM the worker once some have completed;
    start a new one once it is gone. The figures, and the task."""
    env = {"TASKS_SHUTDOWN_GRACE_SECONDS": str(grace)}
    old = fault_worker(concurrency=4, **env)
    task = services.task_create(
        id="deployed", action="test-effect", payload={"seconds": seconds}, max_retries=0
    )
    for _ in range(runs):
        services.task_execute(task=task)
    wait_until(
        lambda: (
            Run.objects.filter(task=task, status=RunStatus.COMPLETED).count() >= 4
            and Run.objects.filter(task=task, status=RunStatus.RUNNING).count() >= 2
        ),
        timeout=60,
        interval=0.05,
        message="some runs completed and some running",
    )
    running_at_sigterm = Run.objects.filter(task=task, status=RunStatus.RUNNING).count()
    signalled = time.monotonic()
    old.stop(signal.SIGTERM, timeout=PLATFORM_GRACE_SECONDS)  # SIGKILL after that
    exited_after = round(time.monotonic() - signalled, 2)
    log = old.log()
    fault_worker(concurrency=4, **env)
    wait_until(lambda: settled(task, runs), timeout=180, interval=0.5, message="every run to end")
    return {
        "runs": runs,
        "run_seconds": seconds,
        "shutdown_grace_s": grace,
        "platform_grace_s": PLATFORM_GRACE_SECONDS,
        "running_at_sigterm": running_at_sigterm,
        "worker_exited_after_s": exited_after,
        "handed_back_log": "handing back" in log,
        "interrupted": Run.objects.filter(task=task, status=RunStatus.INTERRUPTED).count(),
    }, task


def assert_nothing_failed_lost_or_duplicated(task: object, runs: int) -> dict[str, int]:
    result = tally(task)  # type: ignore[arg-type]
    assert result.requested == runs
    assert result.completed == runs
    assert not Run.objects.filter(task=task, status=RunStatus.FAILED).exists()
    assert result.effects == runs and result.lost == 0
    assert result.duplicated == 0
    assert result.attempts_executed_twice == 0
    return {
        "completed": result.completed,
        "failed": 0,
        "lost": result.lost,
        "duplicated": result.duplicated,
        "re_executed": result.re_executions,
    }


def test_sigterm_lets_runs_finish_within_the_grace_and_nothing_fails(
    fault_worker: StartProc, figures: Figures
) -> None:
    """50 runs of 3 s; shutdown grace 8 s under the platform's 10 s: the running runs finish
    on the old worker, the rest wait in the broker for the new one."""
    stats, task = deploy(fault_worker, runs=50, seconds=3, grace=8)
    counts = assert_nothing_failed_lost_or_duplicated(task, 50)
    assert stats["worker_exited_after_s"] < PLATFORM_GRACE_SECONDS  # not SIGKILLed
    assert stats["interrupted"] == 0  # every run that had started finished in the grace
    figures(**stats, **counts)


def test_runs_longer_than_the_grace_are_handed_back_and_run_again_elsewhere(
    fault_worker: StartProc, figures: Figures
) -> None:
    """Runs of 3 s with a 1 s grace: those running at the deadline are handed back and run
    again on the new worker as interruptions, not failures."""
    stats, task = deploy(fault_worker, runs=12, seconds=3, grace=1)
    counts = assert_nothing_failed_lost_or_duplicated(task, 12)
    assert stats["worker_exited_after_s"] < PLATFORM_GRACE_SECONDS
    assert stats["handed_back_log"]
    assert stats["interrupted"] >= 1
    cut = Run.objects.filter(task=task, status=RunStatus.INTERRUPTED)
    assert all("died while running it" in r.error for r in cut), [r.error for r in cut]
    figures(**stats, **counts)
