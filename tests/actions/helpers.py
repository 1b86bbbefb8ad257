"""Small shared helpers for the action tests."""

from __future__ import annotations

import uuid

from django.utils import timezone

from tasks_app import actions
from tasks_app.models import Run, RunStatus
from tasks_app.worker import run_execution
from tests.stored_rows import run_set


def context(timeout_seconds: int | None = None) -> actions.RunContext:
    now = timezone.now()
    return actions.RunContext(
        run_id=str(uuid.uuid4()),
        task_id="t",
        attempt=1,
        scheduled_for=now,
        due_at=now,
        timeout_seconds=timeout_seconds,
    )


def finished(run: Run) -> Run | None:
    run.refresh_from_db()
    return (
        run if run.status not in (RunStatus.PENDING, RunStatus.QUEUED, RunStatus.RUNNING) else None
    )


def execute_in_process(run: Run) -> Run:
    """Run ``run`` in this process through the real service (the broker hand-off is the one
    step skipped: the test transaction never commits, so nothing is published)."""
    run_set(run.pk, status=RunStatus.QUEUED)
    result = run_execution.run_execute(run_id=str(run.pk), worker="pytest")
    assert result is not None
    result.refresh_from_db()
    return result
