"""New runs: one stored and published when due, and a new attempt of a finished run."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q

from .. import store
from ..celery_defaults import project_app
from ..models import RETRYABLE_RUN_STATUSES, Run, RunStatus, Task, Trigger
from ..runtime import clock
from ..runtime.run_logs import run_log
from . import permissions
from .errors import ConflictError
from .run_release import enqueue_on_commit
from .unique_calls import UniqueCall, key_take, unique_due_at

log = logging.getLogger(__name__)


def new_run(
    task: Task,
    *,
    trigger: str,
    due_at: datetime,
    scheduled_for: datetime | None = None,
    attempt: int = 1,
    first_attempt_id: Any = None,
    expires_at: datetime | None = None,
    interruptions: int = 0,
    payload: Any = None,
    queue: str = "",
    priority: int | None = None,
    requested_by: str = "",
    action: str = "",
) -> Run:
    """An unsaved ``pending`` run of ``task`` (its deadline from ``expires_after_seconds``
    unless given), with its own ``payload``, ``queue`` and ``priority`` if given (unset: the
    task's), made with the task's action as it is now (``Run.action``, which masks its
    secrets for good) and asked for by ``requested_by`` (``Run.requested_by``)."""
    return Run(
        task=task,
        trigger=trigger,
        action=action or task.action,
        requested_by=requested_by,
        status=RunStatus.PENDING,
        due_at=due_at,
        scheduled_for=scheduled_for or due_at,
        attempt=attempt,
        first_attempt_id=first_attempt_id,
        expires_at=expires_at,
        interruptions=interruptions,
        payload=payload,
        queue=queue,
        priority=priority,
    )


def runs_insert(runs: list[Run], *, release_by: datetime | None = None) -> list[Run]:
    """Store ``runs`` (beat's fires; a backfill's runs) in one statement, skipping fires
    already recorded; those inserted. With ``release_by``, a run due by then is queued at
    its ``created_at`` if the release rule lets it go (the caller publishes it); else all wait
    pending. Their publishing is the caller's."""
    if not runs:
        return []
    return store.insert_runs(runs, horizon_end=release_by)


def same_call(run: Run) -> dict[str, Any]:
    """What a later attempt of ``run`` keeps of it: its own payload, queue and priority, and
    with its own payload the action it was made with (whose secrets that payload holds)."""
    return {
        "payload": run.payload,
        "queue": run.queue,
        "priority": run.priority,
        "action": run.made_with if run.payload is not None else "",
    }


def run_create(
    *,
    task: Task,
    trigger: str,
    due_at: datetime,
    now: datetime,
    unique: UniqueCall | None = None,
    **extra: Any,
) -> Run:
    """Store a ``pending`` run, move its task to ``pending`` (unless it is running or paused)
    with the run in its ``next_run_at`` (one statement, ``create_run``), and publish it at
    commit if it is due within the horizon. Refused (``ImproperlyConfigured``) before anything
    is written when the project's Celery app is not loaded.

    With ``unique`` (a keyed call, ``services.unique_calls``), the call is decided under its
    key's lock first: it may get the run that holds the key instead (``Run.deduplicated``
    true; nothing written), or replace that run with the new one."""
    project_app()
    if unique is not None:
        with transaction.atomic():
            return _unique_run_create(
                task=task, trigger=trigger, due_at=due_at, now=now, unique=unique, **extra
            )
    run = new_run(task, trigger=trigger, due_at=due_at, **extra)
    return _run_insert(run, task=task, now=now)


def _unique_run_create(
    *, task: Task, trigger: str, due_at: datetime, now: datetime, unique: UniqueCall, **extra: Any
) -> Run:
    due_at = unique_due_at(unique, due_at=due_at, now=now)
    run = new_run(task, trigger=trigger, due_at=due_at, **extra)
    held = key_take(task_id=task.pk, call=unique, new_run_id=run.id, now=now)
    if held is not None:
        found: Run = Run.objects.select_related("task").get(pk=held)
        found.deduplicated = True
        return found
    run.unique_key = unique.key
    return _run_insert(run, task=task, now=now)


def _run_insert(run: Run, *, task: Task, now: datetime) -> Run:
    # Created at the caller's now, the database's clock like its due instant: a run due
    # "now" is not taken for a timed one (Run.timed) by the hosts' clocks' difference.
    run.created_at = now
    store.create_run(run)
    enqueue_on_commit(run, now=now)
    if run.requested_by and log.isEnabledFor(logging.INFO):
        run_log(log, run).info(
            "run %s of task %s created by %s",
            run.id,
            task.id,
            run.requested_by,
            extra={"requested_by": run.requested_by},
        )
    return run


def requester(by: permissions.Actor) -> str:
    """``Run.requested_by`` for a run that ``by`` asks for through a service: the user's
    name, the trusted caller's (the CLI's ``cli:<login>``, ``system``), or ``system`` when a
    service is called without one."""
    return permissions.actor_name(by) or "system"


def run_retry(*, run: Run, by: permissions.Actor = "") -> Run:
    """A new attempt, due now, of a finished, unsuccessful run (``failed``, ``expired``,
    ``cancelled``), linked to the same first attempt.

    Only the latest attempt of a run can be retried, and the attempts of one run are
    serialized on its first attempt's row, so a double click makes one new attempt, not two
    (the second gets a :class:`ConflictError`). ``by`` needs ``add_run``: a retry is a new run.
    """
    by = permissions.authorize(by, "retry", action=run.task.action)
    if run.status not in RETRYABLE_RUN_STATUSES:
        raise ConflictError(
            f"run {run.id} is {run.status}; only failed, expired or cancelled runs can be retried"
        )
    first_id = run.first_attempt_id or run.id
    with transaction.atomic():
        list(Run.objects.select_for_update().filter(pk=first_id).values_list("pk", flat=True))
        latest = _last_attempt(run)
        if latest > run.attempt:
            raise ConflictError(f"run {run.id} was already retried (attempt {latest} exists)")
        now = clock.now()
        return run_create(
            task=run.task,
            trigger=Trigger.RETRY,
            due_at=now,
            now=now,
            scheduled_for=run.scheduled_for,
            attempt=latest + 1,
            first_attempt_id=first_id,
            requested_by=requester(by),
            **same_call(run),
        )


def _last_attempt(run: Run) -> int:
    first = run.first_attempt_id or run.id
    latest = (
        Run.objects.filter(Q(pk=first) | Q(first_attempt_id=first))
        .order_by("-attempt")
        .values_list("attempt", flat=True)
        .first()
    )
    return latest or run.attempt
