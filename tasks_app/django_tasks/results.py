"""A run, with every attempt of it, read as Django's ``TaskResult``."""

from __future__ import annotations

from typing import Any

from django.utils.dateparse import parse_datetime

from ..models import Run, RunStatus, Trigger
from ..selectors.runs import run_attempts
from .framework import TaskError, TaskResult, TaskResultStatus, exception_class_path

# A run's status as Django's framework names it: an attempt that is not yet finished, or
# that a new attempt follows (retrying, interrupted), is READY; every end but success FAILED.
RESULT_STATUS = {
    RunStatus.PENDING: "READY",
    RunStatus.QUEUED: "READY",
    RunStatus.RETRYING: "READY",
    RunStatus.INTERRUPTED: "READY",
    RunStatus.RUNNING: "RUNNING",
    RunStatus.COMPLETED: "SUCCESSFUL",
    RunStatus.FAILED: "FAILED",
    RunStatus.EXPIRED: "FAILED",
    RunStatus.CANCELLED: "FAILED",
    RunStatus.SKIPPED: "FAILED",
}


def task_result(run: Run, *, task: Any, backend: str, result_id: str | None = None) -> Any:
    """``run`` and its later attempts (retries, interruptions) as a ``TaskResult`` of
    ``task``, read now: the status of the latest attempt, one error per unsuccessful
    attempt, one worker id per attempt that started (``attempts``), the first start and the
    latest, and the latest end once finished."""
    attempts = list(run_attempts(run=run)) or [run]
    latest = attempts[-1]
    started = [a for a in attempts if a.started_at is not None]
    status = TaskResultStatus(RESULT_STATUS[RunStatus(latest.status)])
    finished = status in (TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED)
    payload = run.call_payload
    using = payload.get("using")
    if using:  # the Task the run was enqueued for, as Django gives it back
        run_after = using.get("run_after")
        task = task.using(
            priority=using["priority"],
            queue_name=using["queue_name"],
            run_after=run_after and parse_datetime(run_after),
        )
    elif run.trigger == Trigger.AT:
        task = task.using(run_after=run.due_at)
    result = TaskResult(
        task=task,
        id=result_id or str(run.id),
        status=status,
        enqueued_at=attempts[0].created_at,
        started_at=started[0].started_at if started else None,
        finished_at=latest.finished_at if finished else None,
        last_attempted_at=started[-1].started_at if started else None,
        args=list(payload.get("args") or []),
        kwargs=dict(payload.get("kwargs") or {}),
        backend=backend,
        errors=[
            TaskError(exception_class_path=exception_class_path(a.error), traceback=a.error)
            for a in attempts
            if a.error and a.status != RunStatus.COMPLETED
        ],
        worker_ids=[a.worker for a in started if a.worker],
    )
    if status == TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", latest.result)
    return result


def enqueued_result(run: Run, *, task: Any, backend: str) -> Any:
    """The ``TaskResult`` of ``run`` just enqueued for ``task`` (nothing read back: it is
    ``READY`` with no attempt yet)."""
    payload = run.call_payload
    return TaskResult(
        task=task,
        id=str(run.id),
        status=TaskResultStatus.READY,
        enqueued_at=run.created_at,
        started_at=None,
        finished_at=None,
        last_attempted_at=None,
        args=list(payload["args"]),
        kwargs=dict(payload["kwargs"]),
        backend=backend,
        errors=[],
        worker_ids=[],
    )


def started_result(ctx: Any, *, task: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """The ``TaskResult`` of a run's first attempt as it starts (``RUNNING``), from what the
    worker's claim already read (``ctx``: an action's ``RunContext``), with no query."""
    return TaskResult(
        task=task,
        id=ctx.run_id,
        status=TaskResultStatus.RUNNING,
        enqueued_at=ctx.created_at,
        started_at=ctx.started_at,
        finished_at=None,
        last_attempted_at=ctx.started_at,
        args=args,
        kwargs=kwargs,
        backend=task.backend,
        errors=[],
        worker_ids=[ctx.worker] if ctx.worker else [],
    )
