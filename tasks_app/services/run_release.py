"""Getting runs from the database onto the broker: horizon release.

A run is published only when it is due within ``TASKS_RELEASE_HORIZON_SECONDS``, with a
Celery ``eta`` for its exact instant, so a worker never holds more than a horizon's worth of
ETA messages however many future runs are stored. Runs due later stay ``pending`` and the
beat process releases them (:func:`release_due_runs`) as they come within the horizon.

Publishing is a two-step hand-off: the run is marked ``queued`` (a conditional update from
``pending``) and committed, then the message is sent (``tasks_app.messaging.dispatch``). If the send
fails the run goes back to ``pending`` and is released again on a later tick, so a broker
outage delays runs but loses none. A run whose message the broker itself refuses (a queue
name it rejects) is told apart from an outage (``dispatch.isolate_refused``) and ``failed``
with the broker's reason instead of being retried forever. A worker only claims ``queued`` runs, so a message can
never overtake its row.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from uuid import UUID

from django.db import transaction

from .. import store
from ..conf import app_settings
from ..messaging import dispatch
from ..models import (
    Run,
    RunStatus,
)
from ..runtime import clock


def horizon() -> timedelta:
    return timedelta(seconds=app_settings.RELEASE_HORIZON_SECONDS)


def enqueue_on_commit(run: Run, *, now: datetime) -> None:
    """Publish ``run`` when the surrounding transaction commits, if it is due soon."""
    if run.due_at <= now + horizon():
        run_id = run.id
        transaction.on_commit(lambda: publish_runs([run_id]))


def release_due_runs(
    *, now: datetime | None = None, batch: int | None = None, wait: bool = True
) -> int:
    """Publish pending runs due within the horizon, oldest first; returns how many went out.

    One release at a time (``release_lock``), so runs released together go out in due order
    (a resumed queue's runs, beat's pass beside it); ``wait=False`` (beat's passes) skips the
    pass when another release is under way. The runs are taken with ``FOR UPDATE SKIP
    LOCKED`` and flipped to ``queued`` before their lock is released, so an enqueue
    publishing its own run at the same time (``publish_runs``) never sends one twice.
    """
    if not store.release_lock(wait=wait):
        return 0
    try:
        now = now or clock.now()
        limit = batch or app_settings.RELEASE_BATCH
        total = 0
        while True:
            runs = store.release_due_runs(until=now + horizon(), now=now, limit=limit)
            total += send_queued(runs, now=now)
            if len(runs) < limit:
                return total
    finally:
        store.release_unlock()


def publish_runs(run_ids: Iterable[UUID]) -> int:
    """Publish the given runs if they are still pending (used at commit time)."""
    ids = list(run_ids)
    if not ids:
        return 0
    now = clock.now()
    return send_queued(store.release_runs(run_ids=ids, now=now), now=now)


def send_queued(runs: list[Run], *, now: datetime) -> int:
    """Publish runs already marked ``queued`` (and committed); returns how many went out.

    Runs whose publish failed go back to ``pending`` (a conditional update from ``queued``)
    and the next release pass sends them again.
    """
    failed = dispatch.send(runs, now=now)
    refused: dict[UUID, str] = {}
    if failed:
        # One bad run (a queue name the broker refuses) must not stay pending forever and
        # be retried every pass: tell it from an outage, and fail it with the reason.
        retry = set(failed)
        failed, refused = dispatch.isolate_refused([r for r in runs if r.id in retry], now=now)
    if refused:
        task_ids = store.refuse_runs(
            errors={i: f"the broker refused the run's message: {e}" for i, e in refused.items()},
            now=now,
        )
        # The tasks' status follows their runs (as run_lifecycle.task_after_run does).
        store.task_after_run(task_ids=set(task_ids), run_status=RunStatus.FAILED)
    if failed:
        store.unqueue_runs(run_ids=failed)
    return len(runs) - len(failed) - len(refused)
