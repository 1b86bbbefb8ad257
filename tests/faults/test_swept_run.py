"""A running run that the sweep fails (here: as past its time limit, the sweep's own write) is
stopped where it runs: its pool process ends before the action returns, so the attempt does
not go on beside its retry and records no second outcome; the worker keeps serving."""

from __future__ import annotations

import time

import pytest

from tasks_app import services
from tasks_app.models import Run, RunStatus
from tests.effects.models import Execution
from tests.processes import wait_until

from .conftest import Figures, StartProc
from .helpers import chains

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_run_the_sweep_failed_is_stopped_where_it_runs(
    fault_worker: StartProc, fault_beat: StartProc, figures: Figures
) -> None:
    worker = fault_worker(concurrency=1)
    fault_beat()  # releases the retry when its backoff ends
    task = services.task_create(
        id="swept",
        action="test-effect",
        payload={"seconds": 6},
        max_retries=1,
        retry_backoff_seconds=1,
    )
    first = services.task_execute(task=task)
    wait_until(
        lambda: Execution.objects.filter(attempt_run_id=first.id).exists(),
        timeout=30,
        interval=0.05,
        message="the first attempt's action to start",
    )
    running = Run.objects.select_related("task").get(pk=first.id)
    swept = time.monotonic()
    services.run_fail(run=running, error="timed out after 1 s (still running after 9 s)")

    wait_until(
        lambda: f"lease lost on run {first.id}" in worker.log(),
        timeout=10,
        message="the worker to stop the swept run's action",
    )
    stopped_after = time.monotonic() - swept
    time.sleep(7)  # past the action's own end, had it gone on
    execution = Execution.objects.get(attempt_run_id=first.id)
    assert execution.finished_at is None, "the swept attempt's action went on to its end"
    assert "its completed outcome is not recorded" not in worker.log()
    stored = Run.objects.get(pk=first.id)
    assert (stored.status, stored.error) == (
        RunStatus.RETRYING,
        "timed out after 1 s (still running after 9 s)",
    )

    # The retry runs on the same worker, in the pool process that replaced the stopped one.
    wait_until(
        lambda: chains(task)[first.id][-1].status == RunStatus.COMPLETED,
        timeout=60,
        message="the retry to complete",
    )
    attempts = chains(task)[first.id]
    assert [a.status for a in attempts] == [RunStatus.RETRYING, RunStatus.COMPLETED]
    retry = Execution.objects.get(attempt_run_id=attempts[1].id)
    assert retry.pid != execution.pid
    figures(stopped_after_sweep_s=round(stopped_after, 2), attempts=2)
