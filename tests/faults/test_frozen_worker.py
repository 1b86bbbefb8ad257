"""A pool process stopped (SIGSTOP) longer than the stall window: the sweep interrupts its run
and another worker runs the next attempt. When the stopped process goes on (SIGCONT), it
kills itself before its action takes another step — here an action that returns as soon as
it is continued — so the old attempt does not finish beside the new one, and the worker
(its main process starts a new pool process) keeps serving."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tasks_app import services
from tasks_app.models import Run, RunStatus
from tests.effects.models import Execution
from tests.processes import wait_until

from .conftest import Figures, StartProc
from .helpers import chains

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def state(pid: int) -> str | None:
    """The process's state letter (R, S, T stopped, Z dead but not reaped), None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


def test_a_pool_process_continued_after_its_run_went_elsewhere_stops_its_action(
    fault_worker: StartProc, fault_beat: StartProc, figures: Figures
) -> None:
    stopping = fault_worker(concurrency=1)
    fault_beat()
    task = services.task_create(id="frozen", action="test-stop-self", payload={}, max_retries=0)
    first = services.task_execute(task=task)
    wait_until(
        lambda: Execution.objects.filter(attempt_run_id=first.id).exists(),
        timeout=30,
        interval=0.05,
        message="the first attempt's action to start",
    )
    pid = Execution.objects.get(attempt_run_id=first.id).pid
    wait_until(lambda: state(pid) == "T", timeout=10, message="the pool process to stop itself")
    try:
        other = fault_worker(concurrency=1)
        wait_until(
            lambda: Execution.objects.filter(run_id=first.id).count() == 2,
            timeout=60,
            message="the run's next attempt to start on the other worker",
        )
    finally:
        os.kill(pid, signal.SIGCONT)
    resumed = time.monotonic()
    assert Run.objects.get(pk=first.id).status == RunStatus.INTERRUPTED

    wait_until(
        lambda: state(pid) in (None, "Z"),
        timeout=10,
        interval=0.02,
        message="the continued pool process to stop",
    )
    stopped_after = time.monotonic() - resumed
    # The old action never returned: it did not go on beside the next attempt.
    assert Execution.objects.get(attempt_run_id=first.id).finished_at is None
    assert "past the stall window); stopping this pool process" in stopping.log()

    wait_until(
        lambda: chains(task)[first.id][-1].status == RunStatus.COMPLETED,
        timeout=30,
        message="the next attempt to complete",
    )
    attempts = chains(task)[first.id]
    assert [a.status for a in attempts] == [RunStatus.INTERRUPTED, RunStatus.COMPLETED]
    assert attempts[1].worker != attempts[0].worker
    # The message the stopped worker handed back when its pool process died changed nothing.
    assert Execution.objects.filter(run_id=first.id).count() == 2

    # The worker whose pool process stopped is still a worker.
    other.stop()
    echo = services.task_create(id="after-stop", action="echo", payload={"message": "ok"})
    nxt = services.task_execute(task=echo)
    wait_until(
        lambda: Run.objects.get(pk=nxt.pk).status == RunStatus.COMPLETED,
        timeout=30,
        message="the worker whose pool process stopped to keep serving",
    )
    assert Run.objects.get(pk=nxt.pk).worker == attempts[0].worker
    figures(stopped_after_sigcont_s=round(stopped_after, 2), attempts=2)
