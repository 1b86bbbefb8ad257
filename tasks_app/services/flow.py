"""Flow control: at most N runs of a task at once, at most M at once per key, at most so many
starts per period (per task and per key), across every worker (docs/flow-control.md).

Held by the database when a run is claimed: ``claim_run`` asks ``tasks_app_flow_verdict``
(tasks_app/store/schema.sql), which takes the task's lock (a limit of its own) or the key's
(limits per key only) and counts the running runs from the runs table with a snapshot taken
after it, so a killed worker, a deploy, a broker restart or two workers racing never exceed a
limit. A run's key is its task's ``flow_key`` read from its payload (a ``@task`` function's
keyword arguments). A run that may not start yet goes back to ``pending``, *held*
(``Run.held``, :func:`flow_hold`): it holds no worker slot and the release does not publish
it.

- Held for a **concurrency** slot, it is let go (:func:`flow_admit`) when a slot frees: by
  the worker that finished a run of the task, and by beat's passes (a killed worker, a
  limit raised). Slots go round-robin between keys, the key whose turn is oldest first,
  and in due order within a key; a run let go keeps its turn ahead of runs that arrive
  meanwhile (they join the held ones).
- Held by a **rate**, it reserved the next start the rate allows (``Run.not_before``): starts
  are spaced ``period / N`` apart, each start or reservation pushing the task's (and the
  key's) next free start one step on, so a backlog is spread over time once instead of
  retried. It is published for that instant when it comes within the release horizon.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from django.db import transaction

from .. import store
from ..models import HoldReason, Run, RunStatus, Task, TaskStatus
from ..runtime import clock
from .run_release import horizon, send_queued

log = logging.getLogger(__name__)
# How many of a task's earliest held runs one admission reads to share the free slots
# between their keys.
ADMIT_WINDOW = 2000


def limited(task: Task) -> bool:
    """Whether ``task`` has flow control (its claims ask for the database's verdict)."""
    return bool(
        task.concurrency_limit
        or task.concurrency_limit_per_key
        or task.rate_limit
        or task.rate_limit_per_key
    )


def flow_hold(run: Run, refusal: str) -> None:
    """Hold ``run`` (queued, refused by its flow control's verdict ``refusal``) as pending:
    for a concurrency slot (``concurrency``, or ``line``: slots are free but runs held
    before it wait for them, and one of those is let go now), or until the start its rate
    reserved (``rate:<epoch>``), published again for it at once when that is within the
    release horizon."""
    reason, _, epoch = refusal.partition(":")
    not_before = datetime.fromtimestamp(float(epoch), tz=UTC) if epoch else None
    held = HoldReason.RATE if reason == HoldReason.RATE else HoldReason.CONCURRENCY
    key = store.hold_run(run_id=run.pk, held=held, not_before=not_before)
    if key is None:  # no longer queued (cancelled meanwhile): nothing to hold
        return
    run.status, run.held, run.not_before, run.flow_key = RunStatus.PENDING, held, not_before, key
    log.debug("run %s held (%s) until %s", run.pk, reason, not_before or "a slot frees")
    now = clock.now()
    if reason == "line":
        flow_admit([run.task_id], now=now)
    elif not_before is not None and not_before <= now + horizon():
        _let_go([run.pk], now=now)


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
                store.flow_lock(task_id=task.pk)
            ids = _due_reservations(task, now) + _free_slots(task, now)
            if ids:
                admitted += store.admit_runs(run_ids=ids, now=now)
    return _send(admitted, now=now)


def _let_go(run_ids: list[Any], *, now: datetime) -> int:
    """Publish a held run now: one held by a rate, for its reserved start."""
    return _send(store.admit_runs(run_ids=run_ids, now=now), now=now)


def _send(run_ids: list[Any], *, now: datetime) -> int:
    """Publish runs let go (queued and committed); one whose message does not go out is
    pending and held again, for the next admission."""
    if not run_ids:
        return 0
    return send_queued(list(Run.objects.select_related("task").filter(pk__in=run_ids)), now=now)


def _paused(task: Task) -> bool:
    return task.state.status == TaskStatus.PAUSED


def _due_reservations(task: Task, now: datetime) -> list[Any]:
    # Of a paused task, only runs a person asked for go ahead of the pause.
    return store.held_for_rate(task_id=task.pk, until=now + horizon(), paused=_paused(task))


def _free_slots(task: Task, now: datetime) -> list[Any]:
    free = ADMIT_WINDOW
    if task.concurrency_limit:
        runs = Run.objects.filter(task_id=task.pk)
        running = runs.filter(status=RunStatus.RUNNING).count()
        on_their_way = runs.filter(status=RunStatus.QUEUED, due_at__lte=now).count()
        free = task.concurrency_limit - running - on_their_way
    if free <= 0:
        return []
    return store.held_for_slots(
        task_id=task.pk,
        free=free,
        key_limit=task.concurrency_limit_per_key,
        window=ADMIT_WINDOW,
        now=now,
        paused=_paused(task),
    )
