"""Expiry: a run that could not start by its deadline is expired, never run late — whether a
worker finds it late (at claim) or no worker is up at all (beat's sweep)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tasks_app import services
from tasks_app.models import Run, RunStatus
from tests.effects.models import Execution
from tests.processes import wait_until

from .conftest import Figures, StartProc

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def status(run: Run) -> str:
    run.refresh_from_db()
    return run.status


def test_run_due_while_no_worker_is_up_expires_when_one_starts(
    fault_worker: StartProc, figures: Figures
) -> None:
    task = services.task_create(id="fresh-only", action="test-effect", payload={})
    run = services.task_schedule_once(task=task, delay_seconds=0, expires_in_seconds=5)
    assert status(run) == RunStatus.QUEUED  # published, waiting on the broker
    deadline = run.expires_at
    assert deadline is not None
    wait_until(lambda: timezone.now() > deadline, timeout=15, message="the deadline to pass")

    fault_worker()  # no beat: the worker's claim sees the deadline
    wait_until(lambda: status(run) == RunStatus.EXPIRED, timeout=20, message="the run to expire")
    assert run.started_at is None
    assert run.error.startswith("expired: could not start by")
    assert not Execution.objects.exists()  # never executed
    on_time = services.task_schedule_once(task=task, delay_seconds=0, expires_in_seconds=5)
    wait_until(lambda: status(on_time) == RunStatus.COMPLETED, timeout=15, message="an on-time run")
    figures(expires_in_s=5, worker_started_after_s=10, status=run.status, executed=0)


def test_beat_expires_pending_and_queued_runs_with_no_worker_up(fault_beat: StartProc) -> None:
    task = services.task_create(id="fresh-only", action="test-effect", payload={})
    queued = services.task_schedule_once(task=task, delay_seconds=0, expires_in_seconds=1)
    held = services.task_create(id="held", action="test-effect", payload={})
    services.task_pause(task=held, note="maintenance")  # its delayed run waits, pending
    pending = services.task_schedule_once(task=held, delay_seconds=1, expires_in_seconds=1)
    assert (status(queued), status(pending)) == (RunStatus.QUEUED, RunStatus.PENDING)

    fault_beat()
    wait_until(
        lambda: status(queued) == RunStatus.EXPIRED and status(pending) == RunStatus.EXPIRED,
        timeout=15,
        message="beat to expire both runs",
    )
    assert queued.started_at is None and pending.started_at is None and pending.queued_at is None
    assert pending.error.startswith("expired: could not start by")
    assert not Execution.objects.exists()
