"""Cancelling a running run through a real ``celery worker``: an action (or a ``@task``
function) that polls the request stops cleanly and its run ends ``cancelled`` well within the
grace, in a process that goes on serving; one that ignores it is ended with its pool process
after ``TASKS_CANCEL_GRACE_SECONDS``, its run ``cancelled`` (not interrupted, not retried),
and the worker runs the next run in the process that replaced it."""

from __future__ import annotations

import time
from io import StringIO

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.django_tasks import TaskResultStatus
from tasks_app.models import FINAL_RUN_STATUSES, Run, RunStatus
from tests.django_tasks import functions
from tests.effects.models import Execution
from tests.processes import wait_until

from .conftest import Figures, StartProc

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

GRACE_SECONDS = 4.0
CANCEL_ENV = {"TASKS_CANCEL_GRACE_SECONDS": str(GRACE_SECONDS)}


def started(run: Run) -> Execution:
    return wait_until(
        lambda: Execution.objects.filter(attempt_run_id=run.id).first(),
        timeout=30,
        interval=0.05,
        message=f"run {run.id}'s action to start",
    )


def ended(run: Run, *, timeout: float) -> Run:
    return wait_until(
        lambda: Run.objects.filter(pk=run.pk, status__in=FINAL_RUN_STATUSES).first(),
        timeout=timeout,
        interval=0.02,
        message=f"run {run.id} to end",
    )


def test_an_action_that_polls_the_request_stops_cleanly_in_a_process_that_goes_on(
    fault_worker: StartProc, api: APIClient, figures: Figures
) -> None:
    worker = fault_worker(concurrency=1, **CANCEL_ENV)
    task = services.task_create(
        id="polite", action="test-cancellable", payload={"seconds": 60}, max_retries=2
    )
    run = services.task_execute(task=task)
    execution = started(run)

    asked = time.monotonic()
    response = api.post(f"/api/runs/{run.id}/cancel")
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "running"
    assert response.json()["cancel_requested_at"] is not None
    done = ended(run, timeout=GRACE_SECONDS + 5)
    stopped_after = time.monotonic() - asked

    assert done.status == RunStatus.CANCELLED
    assert done.output.startswith("stopped at the cancel request after")
    assert stopped_after < GRACE_SECONDS, "the action's own stop came after the grace"
    execution.refresh_from_db()
    assert execution.finished_at is not None, "the action did not return"
    assert "cancel grace over" not in worker.log()
    assert not Run.objects.filter(first_attempt=run.pk).exists()  # not retried
    # A second request on the ended run is refused, and changes nothing.
    assert api.post(f"/api/runs/{run.id}/cancel").status_code == 409

    # The same pool process runs the next run: it was not ended.
    after = services.task_execute(task=task, payload={"seconds": 0})
    assert ended(after, timeout=30).status == RunStatus.COMPLETED
    assert Execution.objects.get(attempt_run_id=after.id).pid == execution.pid
    figures(polled_stop_s=round(stopped_after, 2), grace_s=GRACE_SECONDS)


def test_a_task_function_sees_the_request_through_its_context(
    fault_worker: StartProc, figures: Figures
) -> None:
    fault_worker(concurrency=1, **CANCEL_ENV)
    result = functions.until_cancelled.enqueue(60)
    run = wait_until(
        lambda: Run.objects.filter(pk=result.id, status=RunStatus.RUNNING).first(),
        timeout=30,
        interval=0.05,
        message="the @task function's run to start",
    )
    time.sleep(0.3)  # inside the function's loop
    asked = time.monotonic()
    services.run_cancel(run=run)
    done = ended(run, timeout=GRACE_SECONDS + 5)
    stopped_after = time.monotonic() - asked

    assert done.status == RunStatus.CANCELLED and stopped_after < GRACE_SECONDS
    assert functions.until_cancelled.get_result(result.id).status == TaskResultStatus.FAILED
    figures(task_function_stop_s=round(stopped_after, 2))


def test_an_action_that_ignores_the_request_is_ended_after_the_grace_and_not_retried(
    fault_worker: StartProc, figures: Figures
) -> None:
    worker = fault_worker(concurrency=1, **CANCEL_ENV)
    task = services.task_create(
        id="deaf", action="test-effect", payload={"seconds": 30}, max_retries=3
    )
    run = services.task_execute(task=task)
    execution = started(run)

    asked = time.monotonic()
    out = StringIO()
    call_command("tasks", "cancel", str(run.id), stdout=out)
    assert f"asked running run {run.id} to stop" in out.getvalue()
    done = ended(run, timeout=GRACE_SECONDS + 10)
    stopped_after = time.monotonic() - asked

    assert done.status == RunStatus.CANCELLED, done.error
    assert "did not stop within" in done.error
    assert GRACE_SECONDS - 0.5 <= stopped_after < GRACE_SECONDS + 3
    wait_until(
        lambda: f"cancel grace over on run {run.id}" in worker.log(),
        timeout=10,
        message="the worker to end the pool process",
    )
    # The worker comes back: the next run completes, in the process that replaced the one
    # ended; the cancelled run's redelivered message is ignored, never a second attempt.
    after = services.task_execute(task=task, payload={"seconds": 0})
    assert ended(after, timeout=60).status == RunStatus.COMPLETED
    assert Execution.objects.get(attempt_run_id=after.id).pid != execution.pid
    time.sleep(2)
    execution.refresh_from_db()
    assert execution.finished_at is None, "the ignored action went on after its process ended"
    stored = Run.objects.get(pk=run.pk)
    assert (stored.status, stored.error) == (done.status, done.error)
    assert not Run.objects.filter(first_attempt=run.pk).exists()  # not retried, not interrupted
    assert Execution.objects.filter(run_id=run.id).count() == 1  # never executed again
    figures(ignored_stop_s=round(stopped_after, 2), grace_s=GRACE_SECONDS)
