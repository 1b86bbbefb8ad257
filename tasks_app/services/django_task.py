"""Runs enqueued through Django's task framework (``tasks_app.django_tasks``): one task per
``@task`` function, one run per call."""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, TypeVar

from django.core.exceptions import ValidationError
from django.db import connections, transaction

from .. import store
from ..models import Run, RunStatus, Task, Trigger
from ..runtime import clock
from ..runtime.task_framework import ACTION, function_task_fields, function_task_id
from ..vocabulary import validation
from ..vocabulary.choices import REQUESTED_BY_CODE
from .django_task_paths import ENQUEUED_BY
from .errors import ConflictError
from .run_create import run_create
from .run_release import horizon, send_queued
from .task_operations import task_create
from .unique_calls import policy_call

T = TypeVar("T")


def function_task_create(path: str, *, by: str = ENQUEUED_BY) -> Task:
    """The task of the ``@task`` function at ``path`` (action ``django_task``, its payload
    naming the function and no arguments: each run brings its own), made on the function's
    first enqueue or by ``tasks sync``. A concurrent first enqueue that made it first wins."""
    task_id = function_task_id(path)
    try:
        with transaction.atomic():
            return task_create(id=task_id, by=by, **function_task_fields(path))
    except ConflictError:
        found = Task.objects.filter(pk=task_id).first()
        if found is None or found.action != ACTION or found.payload.get("task") != path:
            raise ValidationError(
                {"task": [f"the task id {task_id!r} is taken by a task that does not call {path}"]}
            ) from None
        return found


def django_task_enqueue(
    *,
    path: str,
    args: list[Any],
    kwargs: dict[str, Any],
    queue: str,
    priority: int | None,
    run_after: datetime | None,
    using: dict[str, Any],
) -> Run:
    """A run of the task of the ``@task`` function at ``path`` (made on its first enqueue)
    carrying this call: its payload (the function, ``args``, ``kwargs`` and ``using``, how it
    was enqueued), its ``queue`` (blank: the task's) and ``priority`` (``None``: the
    task's). One statement (``enqueue_run``); the task's policies apply (its deadline, its
    pause, its retries).

    The run is due at ``run_after`` (a past instant: now). Due within the release horizon,
    it is written ``queued`` and published when the surrounding transaction commits (a
    failed publish hands it back to ``pending``, as any release does); later, beat releases
    it in time. ``ValidationError`` names a refused field; nothing is written then.
    """
    (run,), published = _write(
        path=path,
        calls=[(args, kwargs)],
        queue=queue,
        priority=priority,
        run_after=run_after,
        using=using,
    )
    if not published and run.status == RunStatus.QUEUED:
        transaction.on_commit(lambda: send_queued([run], now=clock.now()))
    return run


def django_task_enqueue_many(
    *,
    path: str,
    calls: list[tuple[list[Any], dict[str, Any]]],
    queue: str,
    priority: int | None,
    run_after: datetime | None,
    using: dict[str, Any],
    then: Callable[[list[Run]], T],
) -> T:
    """One run per ``(args, kwargs)`` of ``calls``, as :func:`django_task_enqueue` writes
    one, in one statement (``enqueue_runs``), published together (one batch of confirms)
    when the surrounding transaction commits; returns ``then(runs)``, the caller's own work
    on the written runs (Django's results and their signals).

    Outside a transaction the batch is committed by its statement and published at once,
    in a thread of its own while ``then`` runs in the caller's: a batch spends most of its
    publish waiting for the broker, and the caller's work for each run need not wait for
    it. The call returns once both are done, every message confirmed (or its run handed
    back to ``pending``), as a single enqueue does.

    A function whose task deduplicates its calls (``unique_on``) takes the unique calls'
    way instead (``services.unique_calls``), call after call in one transaction: a call
    whose key an earlier one of the batch or a waiting run holds gets that run (or, with
    ``debounce``, replaces it); each new run is published at commit."""
    if not calls:
        return then([])
    runs, published = _write(
        path=path,
        calls=calls,
        queue=queue,
        priority=priority,
        run_after=run_after,
        using=using,
    )
    if published or runs[0].status != RunStatus.QUEUED:  # beat releases them in time
        return then(runs)
    if transaction.get_connection().in_atomic_block:
        transaction.on_commit(lambda: send_queued(runs, now=clock.now()))
        return then(runs)
    with ThreadPoolExecutor(1, thread_name_prefix="enqueue-many") as publisher:
        sending = publisher.submit(_publish_committed, runs)
        done = then(runs)
        sending.result()
    return done


def _publish_committed(runs: list[Run]) -> None:
    """``send_queued`` in a thread of its own; a failed publish hands runs back to pending
    through the thread's own database connection, closed here."""
    try:
        send_queued(runs, now=clock.now())
    finally:
        connections.close_all()


def _write(
    *,
    path: str,
    calls: list[tuple[list[Any], dict[str, Any]]],
    queue: str,
    priority: int | None,
    run_after: datetime | None,
    using: dict[str, Any],
) -> tuple[list[Run], bool]:
    """The runs of ``calls``, and whether they are published at commit already (the unique
    calls' way) rather than by the caller."""
    now = clock.now()
    due_at = now
    if run_after is not None and run_after > now:
        due_at = validation.check_run_at(run_after, now=now, field="run_after")
    ids = _run_ids(len(calls))
    payloads = [{"task": path, "args": a, "kwargs": k, "using": using} for a, k in calls]
    write = functools.partial(
        store.enqueue_runs,
        task_id=function_task_id(path),
        path=path,
        ids=ids,
        payloads=payloads,
        queue=queue,
        priority=priority,
        due_at=due_at,
        now=now,
        horizon_end=now + horizon(),
    )
    runs = write()
    if runs is None:  # the function's first enqueue, its task deleted, or its calls unique
        task = function_task_of(path)
        if task.unique_on:
            return _unique_write(
                task, payloads, queue=queue, priority=priority, due_at=due_at
            ), True
        runs = write()
        if runs is None:
            raise ValidationError({"task": [f"the task of {path} could not be written"]})
    return runs, False


def function_task_of(path: str) -> Task:
    """The task of the ``@task`` function at ``path``, made if missing (as on its first
    enqueue); ``ValidationError`` when its id is taken by a task that calls something else."""
    found = Task.objects.filter(
        pk=function_task_id(path), action=ACTION, payload__task=path
    ).first()
    return found or function_task_create(path)


def _unique_write(
    task: Task,
    payloads: list[dict[str, Any]],
    *,
    queue: str,
    priority: int | None,
    due_at: datetime,
) -> list[Run]:
    """The runs of calls of a function whose task deduplicates its calls, in the order of
    ``payloads``, in one transaction: each call keyed by the task's policy
    (``unique_calls.policy_call``; a call lacking the named argument is not deduplicated) and
    written by ``run_create`` under its key's lock, so a key repeated within the batch finds
    its earlier call's run. A duplicate is the run that holds the key (``deduplicated``)."""
    now = clock.now()
    with transaction.atomic():
        return [
            run_create(
                task=task,
                trigger=Trigger.ENQUEUE,
                due_at=due_at,
                now=now,
                unique=policy_call(task, payload),
                payload=payload,
                queue=queue,
                priority=priority,
                requested_by=REQUESTED_BY_CODE,
                action=ACTION,
            )
            for payload in payloads
        ]


def _run_ids(n: int) -> list[uuid.UUID]:
    """``n`` random run ids (UUID version 4, as ``uuid.uuid4``) from one read of the
    system's random source instead of one read each."""
    data = os.urandom(16 * n)
    return [uuid.UUID(bytes=data[i : i + 16], version=4) for i in range(0, 16 * n, 16)]
