"""Chains of attempts built through the run lifecycle's services (a run retried, interrupted,
failed for good), without a worker: the attempt is put ``running`` as a worker's claim would."""

from __future__ import annotations

from django.utils import timezone

from tasks_app import services
from tasks_app.models import Run, RunStatus, Task
from tasks_app.worker import run_execution
from tests.stored_rows import run_set


def running(run: Run, *, worker: str = "w1@host") -> Run:
    now = timezone.now()
    run_set(run.pk, status=RunStatus.RUNNING, queued_at=now, started_at=now, worker=worker)
    return Run.objects.select_related("task").get(pk=run.pk)


def next_attempt(run: Run) -> Run:
    first = run.first_attempt_id or run.id
    return (
        Run.objects.select_related("task")
        .filter(first_attempt_id=first, attempt=run.attempt + 1)
        .get()
    )


def fail(run: Run, error: str, *, worker: str = "w1@host") -> Run:
    """The attempt fails; the next attempt (retrying) or ``None`` (failed for good)."""
    services.run_fail(run=running(run, worker=worker), error=error)
    after = Run.objects.get(pk=run.pk)
    return next_attempt(after) if after.status == RunStatus.RETRYING else after


def interrupt(run: Run, *, worker: str = "w1@host") -> Run:
    """The attempt's worker dies under it; the next attempt."""
    services.run_interrupt(run=running(run, worker=worker), reason=f"worker lost: {worker} died")
    return next_attempt(run)


def complete(run: Run, *, worker: str = "w2@host", result: object = None) -> Run:
    run_execution.run_complete(run=running(run, worker=worker), output="done", result=result)
    return Run.objects.get(pk=run.pk)


def flaky_task(task_id: str, *, max_retries: int) -> Task:
    return services.task_create(
        id=task_id, action="noop", max_retries=max_retries, retry_backoff_seconds=1
    )
