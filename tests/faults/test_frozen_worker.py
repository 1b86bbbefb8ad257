"""A worker stopped (SIGSTOP) longer than the stall window: the sweep interrupts its run and
another worker runs the next attempt. When the frozen worker goes on (SIGCONT), its pool
process finds on its next lease renewal that the run is no longer its own and kills itself:
the old attempt's action stops where it was instead of running beside the new attempt, and
the worker keeps serving."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tasks_app import services
from tasks_app.models import Run, RunStatus
from tests.effects.models import Execution
from tests.processes import wait_until

from .conftest import FAULT_ENV, Figures, StartProc
from .helpers import chains

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# Long enough that the first attempt's action is still mid-sleep after the freeze.
ACTION_SECONDS = 12.0


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_frozen_worker_stops_its_action_once_its_run_went_elsewhere(
    fault_worker: StartProc, fault_beat: StartProc, figures: Figures
) -> None:
    frozen = fault_worker(concurrency=1)
    fault_beat()
    task = services.task_create(
        id="frozen", action="test-effect", payload={"seconds": ACTION_SECONDS}, max_retries=0
    )
    first = services.task_execute(task=task)
    wait_until(
        lambda: Execution.objects.filter(attempt_run_id=first.id).exists(),
        timeout=30,
        interval=0.05,
        message="the first attempt's action to start",
    )
    os.killpg(frozen.popen.pid, signal.SIGSTOP)
    try:
        other = fault_worker(concurrency=1)
        wait_until(
            lambda: Execution.objects.filter(run_id=first.id).count() == 2,
            timeout=60,
            message="the run's next attempt to start on the other worker",
        )
    finally:
        os.killpg(frozen.popen.pid, signal.SIGCONT)
    resumed = time.monotonic()
    old = Execution.objects.get(attempt_run_id=first.id)
    assert Run.objects.get(pk=first.id).status == RunStatus.INTERRUPTED

    wait_until(
        lambda: not alive(old.pid),
        timeout=float(FAULT_ENV["TASKS_HEARTBEAT_SECONDS"]) + 5,
        interval=0.05,
        message="the frozen pool process to stop after SIGCONT",
    )
    stopped_after = time.monotonic() - resumed
    # The old action never returned: its body stopped, it did not run on beside the new one.
    old.refresh_from_db()
    assert old.finished_at is None
    assert "lease lost on run" in frozen.log()

    wait_until(
        lambda: chains(task)[first.id][-1].status == RunStatus.COMPLETED,
        timeout=ACTION_SECONDS + 30,
        message="the next attempt to complete",
    )
    attempts = chains(task)[first.id]
    assert [a.status for a in attempts] == [RunStatus.INTERRUPTED, RunStatus.COMPLETED]
    assert attempts[1].worker != attempts[0].worker
    # The run completed once; the old message the worker handed back changed nothing.
    assert Execution.objects.filter(run_id=first.id).count() == 2

    # The worker that was frozen is still a worker: its main process replaced the pool process.
    other.stop()
    echo = services.task_create(id="after-freeze", action="echo", payload={"message": "ok"})
    nxt = services.task_execute(task=echo)
    wait_until(
        lambda: Run.objects.get(pk=nxt.pk).status == RunStatus.COMPLETED,
        timeout=30,
        message="the once-frozen worker to keep serving",
    )
    assert Run.objects.get(pk=nxt.pk).worker == attempts[0].worker
    figures(stopped_after_sigcont_s=round(stopped_after, 2), attempts=2)
