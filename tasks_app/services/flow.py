"""Flow control: at most N runs of a task at once, at most M at once per key, at most so many
starts per period (per task and per key), across every worker (docs/flow-control.md).

Held by the database when a run is claimed. A task with flow control has its runs' claims
checked under a lock (``claim_run`` refuses them with ``checks`` until then): the task's
(``flow_lock``) when the task has a limit of its own, else the key's ``FlowKey`` row; the running runs are
counted from the runs table itself, so a killed worker, a deploy, a broker restart or two
workers racing never exceed a limit. A run that may not start yet goes back to ``pending``,
*held* (``Run.held``): it holds no worker slot and the release does not publish it.

- Held for a **concurrency** slot, it is let go (:func:`flow_admit`) when a slot frees: by
  the worker that finished a run of the task, and by beat's release passes (a killed
  worker, a limit raised). Slots go round-robin between keys, the key least recently
  started first, and in due order within a key.
- Held by a **rate**, it reserved the next start the rate allows (``Run.not_before``): starts
  are spaced ``period / N`` apart, each start or reservation pushing the task's (and the
  key's) next free start one spacing on, so a backlog is spread over time once instead of
  retried. It is published for that instant when it comes within the release horizon.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils.module_loading import import_string

from .. import clock, store
from ..models import EXPLICIT_TRIGGERS, FlowKey, HoldReason, Run, RunStatus, Task, TaskStatus
from ..validation import rate_interval
from .run_release import horizon, send_queued

log = logging.getLogger(__name__)
KEY_MAX_LENGTH = Run._meta.get_field("flow_key").max_length or 200
# How many of a task's earliest held runs one admission reads to share the free slots
# between their keys.
ADMIT_WINDOW = 2000
DJANGO_TASK_ACTION = "django_task"


def limited(task: Task) -> bool:
    """Whether ``task`` has flow control (its runs' claims are checked under a lock)."""
    return bool(
        task.concurrency_limit
        or task.concurrency_limit_per_key
        or task.rate_limit
        or task.rate_limit_per_key
    )


def run_key(task: Task, payload: Any) -> str:
    """The value of the task's ``flow_key`` in a run's payload, as text ('' when the task
    has none or the payload lacks it: such runs share one key). A ``@task`` function's
    runs read it from the call's arguments, by name, positional ones included."""
    if not task.flow_key or not isinstance(payload, dict):
        return ""
    first, *rest = task.flow_key.split(".")
    if task.action == DJANGO_TASK_ACTION:
        value = _argument(payload, first)
    else:
        value = payload.get(first)
    for part in rest:
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text[:KEY_MAX_LENGTH]


def _argument(payload: dict[str, Any], name: str) -> Any:
    kwargs, args = payload.get("kwargs") or {}, payload.get("args") or []
    if name in kwargs or not args:
        return kwargs.get(name)
    try:  # a positional argument: bound to its name by the function's signature
        func = import_string(payload["task"]).func
        return inspect.signature(func).bind_partial(*args, **kwargs).arguments.get(name)
    except Exception:  # the worker runs it and reports a wrong call; no key here
        return None


def flow_allows(run: Run, *, now: datetime) -> bool:
    """Inside the caller's transaction, after the run's row was locked: whether ``run`` may
    start now under its task's flow control; if not, it is held (``hold_run``). Takes the
    task's flow lock (a limit of the task's own) or its key's (limits per key only)."""
    task = run.task
    key = run_key(task, run.call_payload)
    task_wide = bool(task.concurrency_limit or task.rate_limit)
    if task_wide:
        store.execute("flow_lock", {"task_id": task.pk})
    buckets = _buckets(task, key, lock=not task_wide)
    running = Run.objects.filter(task_id=task.pk, status=RunStatus.RUNNING).exclude(pk=run.pk)
    if task.concurrency_limit and running.count() >= task.concurrency_limit:
        return _hold(run, HoldReason.CONCURRENCY, key=key)
    if (
        task.concurrency_limit_per_key
        and running.filter(flow_key=key).count() >= task.concurrency_limit_per_key
    ):
        return _hold(run, HoldReason.CONCURRENCY, key=key)
    if run.held != HoldReason.CONCURRENCY and _others_waiting(task, key):
        # A slot is free, but runs held before this one wait for it: this one joins them,
        # and the slot goes to whichever is next (round-robin between keys).
        _hold(run, HoldReason.CONCURRENCY, key=key)
        task_id = task.pk
        transaction.on_commit(lambda: flow_admit([task_id]))
        return False
    spacing = [
        (bucket, step)
        for bucket in buckets
        if (step := rate_interval(task.rate_limit_per_key if bucket.per_key else task.rate_limit))
    ]
    reserved = run.not_before is not None and run.not_before <= now
    if spacing and not reserved:
        start = max([now, *(b.next_start_at for b, _ in spacing if b.next_start_at)])
        for bucket, step in spacing:
            bucket.next_start_at = start + step
        _save(spacing)
        if start > now:
            _hold(run, HoldReason.RATE, key=key, not_before=start)
            if start <= now + horizon():  # its message goes out again for that instant
                run_id = run.pk
                transaction.on_commit(lambda: _let_go([run_id]))
            return False
    run.flow_key = key
    for bucket in buckets:
        if bucket.per_key:
            bucket.last_started_at = now
            bucket.save(update_fields=["last_started_at"])
    return True


def _others_waiting(task: Task, key: str) -> bool:
    """Whether runs held for a slot this run would take wait already: any of the task's
    (a limit of the task's own), else its key's."""
    if not (task.concurrency_limit or task.concurrency_limit_per_key):
        return False
    held = Run.objects.filter(
        task_id=task.pk, status=RunStatus.PENDING, held=HoldReason.CONCURRENCY
    )
    if not task.concurrency_limit:
        held = held.filter(flow_key=key)
    return held.exists()


def _buckets(task: Task, key: str, *, lock: bool) -> list[FlowKey]:
    """The task's flow rows this claim reads and writes (its own, for a task-wide rate; the
    key's, for per-key limits or fairness between keys), created on first use; the key's
    row locked when ``lock`` (no lock of the task's own is held)."""
    wanted = []
    if task.rate_limit:
        wanted.append((False, ""))
    if task.flow_key:
        wanted.append((True, key))
    rows = []
    for per_key, value in wanted:
        FlowKey.objects.bulk_create(
            [FlowKey(task_id=task.pk, per_key=per_key, key=value)], ignore_conflicts=True
        )
        found = FlowKey.objects.filter(task_id=task.pk, per_key=per_key, key=value)
        rows.append((found.select_for_update() if lock else found).get())
    return rows


def _save(spacing: Iterable[tuple[FlowKey, timedelta]]) -> None:
    for bucket, _ in spacing:
        bucket.save(update_fields=["next_start_at"])


def _hold(run: Run, reason: str, *, key: str, not_before: datetime | None = None) -> bool:
    store.execute(
        "hold_run",
        {"run_id": run.pk, "held": reason, "not_before": not_before, "flow_key": key},
    )
    run.held, run.not_before, run.flow_key = reason, not_before, key
    log.debug("run %s held (%s) until %s", run.pk, reason, not_before or "a slot frees")
    return False


def flow_admit(task_ids: Iterable[str] | None = None, *, now: datetime | None = None) -> int:
    """Let go the held runs that may start: those held for a concurrency slot while slots
    are free (round-robin between keys), and those held by a rate whose reserved start is
    within the release horizon. ``task_ids``: only those tasks' runs (a worker that just
    finished one), else every task with held runs (beat). Returns how many were published."""
    now = now or clock.now()
    if task_ids is None:
        task_ids = list(
            Run.objects.filter(status=RunStatus.PENDING)
            .exclude(held="")
            .values_list("task_id", flat=True)
            .distinct()
        )
    admitted: list[Any] = []
    for task in Task.objects.select_related("state").filter(pk__in=list(task_ids)):
        with transaction.atomic():
            if task.concurrency_limit:  # serialized with the task's claims
                store.execute("flow_lock", {"task_id": task.pk})
            ids = _due_reservations(task, now) + _free_slots(task, now)
            if ids:
                rows = store.fetch_all("admit_runs", {"run_ids": ids, "now": now})
                admitted += [row[0] for row in rows]
    return _send(admitted, now=now)


def _let_go(run_ids: list[Any]) -> int:
    """Publish a held run now: one held by a rate, for its reserved start."""
    now = clock.now()
    rows = store.fetch_all("admit_runs", {"run_ids": run_ids, "now": now})
    return _send([row[0] for row in rows], now=now)


def _send(run_ids: list[Any], *, now: datetime) -> int:
    """Publish runs let go (queued and committed); one whose message does not go out is
    pending and held again, for the next admission."""
    if not run_ids:
        return 0
    return send_queued(list(Run.objects.select_related("task").filter(pk__in=run_ids)), now=now)


def _paused(task: Task) -> bool:
    return task.state.status == TaskStatus.PAUSED


def _due_reservations(task: Task, now: datetime) -> list[Any]:
    held = Run.objects.filter(
        task_id=task.pk,
        status=RunStatus.PENDING,
        held=HoldReason.RATE,
        not_before__lte=now + horizon(),
    )
    if _paused(task):  # only runs a person asked for go ahead of a pause
        held = held.filter(trigger__in=EXPLICIT_TRIGGERS)
    return list(held.values_list("id", flat=True))


def _free_slots(task: Task, now: datetime) -> list[Any]:
    free = ADMIT_WINDOW
    if task.concurrency_limit:
        runs = Run.objects.filter(task_id=task.pk)
        running = runs.filter(status=RunStatus.RUNNING).count()
        on_their_way = runs.filter(status=RunStatus.QUEUED, due_at__lte=now).count()
        free = task.concurrency_limit - running - on_their_way
    if free <= 0:
        return []
    rows = store.fetch_all(
        "held_for_slots",
        {
            "task_id": task.pk,
            "free": free,
            "key_limit": task.concurrency_limit_per_key,
            "window": ADMIT_WINDOW,
            "now": now,
            "paused": _paused(task),
        },
    )
    return [row[0] for row in rows]
