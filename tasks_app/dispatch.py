"""Getting runs from the database onto the broker: horizon release.

A run is published only when it is due within ``TASKS_RELEASE_HORIZON_SECONDS``, with a
Celery ``eta`` for its exact instant, so a worker never holds more than a horizon's worth of
ETA messages however many future runs are stored. Runs due later stay ``pending`` and the
beat process releases them (``release_due_runs``) as they come within the horizon.

Publishing is a two-step hand-off: the run is marked ``queued`` (a conditional update from
``pending``) and committed, then the message is sent. If the send fails the run goes back to
``pending`` and is released again on a later tick, so a broker outage delays runs but loses
none. A worker only claims ``queued`` runs, so a message can never overtake its row.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from .models import Run, RunStatus, Trigger

log = logging.getLogger(__name__)

EXECUTE_RUN = "tasks_app.execute_run"
# Runs asked for explicitly by a person start even while their task is paused.
EXPLICIT_TRIGGERS = (Trigger.MANUAL, Trigger.API, Trigger.CLI, Trigger.ADMIN, Trigger.RETRY)
HARD_LIMIT_GRACE_SECONDS = 5
# A broker that takes a message but never confirms it (a resource alarm) fails the publish
# after this long instead of hanging the caller; the run stays pending (docs/reliability.md).
PUBLISH_CONFIRM_TIMEOUT_SECONDS = 5.0


def horizon() -> timedelta:
    return timedelta(seconds=settings.TASKS_RELEASE_HORIZON_SECONDS)


def releasable() -> Q:
    return Q(status=RunStatus.PENDING) & (Q(task__paused=False) | Q(trigger__in=EXPLICIT_TRIGGERS))


def enqueue_on_commit(run: Run, *, now: datetime) -> None:
    """Publish ``run`` when the surrounding transaction commits, if it is due soon."""
    if run.due_at <= now + horizon():
        run_id = run.id
        transaction.on_commit(lambda: publish_runs([run_id]))


def release_due_runs(*, now: datetime | None = None, batch: int | None = None) -> int:
    """Publish pending runs due within the horizon, oldest first; returns how many went out.

    Safe to call from several processes at once: rows are taken with
    ``FOR UPDATE SKIP LOCKED`` and flipped to ``queued`` before the lock is released.
    """
    now = now or timezone.now()
    limit = batch or settings.TASKS_RELEASE_BATCH
    total = 0
    while True:
        sent = _publish(Q(due_at__lte=now + horizon()), now=now, limit=limit)
        total += sent
        if sent < limit:
            return total


def publish_runs(run_ids: Iterable[UUID]) -> int:
    """Publish the given runs if they are still pending (used at commit time)."""
    ids = list(run_ids)
    if not ids:
        return 0
    return _publish(Q(id__in=ids), now=timezone.now(), limit=len(ids))


def _publish(which: Q, *, now: datetime, limit: int) -> int:
    with transaction.atomic():
        runs = list(
            Run.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("task")
            .filter(which & releasable())
            .order_by("due_at")[:limit]
        )
        if not runs:
            return 0
        Run.objects.filter(id__in=[r.id for r in runs], status=RunStatus.PENDING).update(
            status=RunStatus.QUEUED, queued_at=now
        )
    return send_queued(runs, now=now)


def send_queued(runs: list[Run], *, now: datetime) -> int:
    """Publish runs already marked ``queued`` (and committed); returns how many went out.

    Runs whose publish failed go back to ``pending`` (a conditional update from ``queued``)
    and the next release pass sends them again.
    """
    if not runs:
        return 0
    if len(runs) > 1 and BatchPublisher.supported(current_app):
        failed = _batch_publisher().publish(runs, now=now)
    else:
        failed = _send_one_by_one(runs, now=now)
    if failed:
        Run.objects.filter(id__in=failed, status=RunStatus.QUEUED).update(
            status=RunStatus.PENDING, queued_at=None
        )
    return len(runs) - len(failed)


def _send_one_by_one(runs: list[Run], *, now: datetime) -> list[UUID]:
    sent = 0
    failed: list[UUID] = []
    app = current_app
    try:
        with app.producer_or_acquire() as producer:
            for run in runs:
                try:
                    app.send_task(EXECUTE_RUN, producer=producer, **message_options(run, now=now))
                    sent += 1
                except Exception:  # the broker refused or vanished: hand the run back
                    log.exception("publishing run %s failed; it stays pending", run.id)
                    failed.append(run.id)
    except Exception:
        log.exception("no broker connection; %d runs stay pending", len(runs) - sent)
        failed = [r.id for r in runs[sent:]]
    return failed


class BatchPublisher:
    """Publishes many run messages on one AMQP channel, confirming them as a batch.

    ``confirm_publish`` in Celery makes every publish wait for its own broker ack (one round
    trip per message). Here the channel is put in confirm mode once, every message of the
    batch is written, then the acks (RabbitMQ acks several at once with ``multiple``) are
    drained. Guarantee is the same — a run counts as sent only once the broker confirmed it —
    at a fraction of the cost (measured in docs/scale.md). Any error drops the connection and
    reports the unconfirmed runs as failed; a message that did reach the broker anyway is
    harmless, the worker's conditional claim ignores duplicates.
    """

    CONFIRM_TIMEOUT = 10.0

    def __init__(self, app: Any) -> None:
        self.app = app
        self._lock = threading.Lock()
        self._conn: Any = None
        self._pid = 0
        self._next_tag = 1
        self._outstanding: dict[int, UUID] = {}
        self._acked: set[UUID] = set()

    @staticmethod
    def supported(app: Any) -> bool:
        url = str(app.conf.broker_write_url or app.conf.broker_url or "")
        return url.startswith(("amqp://", "amqps://", "pyamqp://"))

    def publish(self, runs: list[Run], *, now: datetime) -> list[UUID]:
        """Publish ``runs``; return the ids the broker did not confirm.

        A connection kept from an earlier batch may have died with the broker (a restart):
        the unconfirmed runs are tried once more on a fresh connection before giving up.
        """
        failed = self._publish_once(runs, now=now)
        if failed:
            retry = set(failed)
            failed = self._publish_once([r for r in runs if r.id in retry], now=now)
        if failed:
            log.warning("%d runs stay pending and are released again", len(failed))
        return failed

    def _publish_once(self, runs: list[Run], *, now: datetime) -> list[UUID]:
        with self._lock:
            self._acked = set()
            try:
                producer = self._producer()
                for run in runs:
                    self.app.send_task(
                        EXECUTE_RUN, producer=producer, retry=False, **message_options(run, now=now)
                    )
                    self._outstanding[self._next_tag] = run.id
                    self._next_tag += 1
                deadline = time.monotonic() + self.CONFIRM_TIMEOUT
                while self._outstanding and time.monotonic() < deadline:
                    self._conn.drain_events(timeout=max(deadline - time.monotonic(), 0.01))
            except Exception:
                log.exception("publishing a batch of %d runs failed", len(runs))
                self.close()
            if self._outstanding:
                log.error("%d publishes unconfirmed", len(self._outstanding))
                self.close()
            return [r.id for r in runs if r.id not in self._acked]

    def _producer(self) -> Any:
        if self._conn is None or self._pid != os.getpid():
            options = dict(self.app.conf.broker_transport_options or {})
            options["confirm_publish"] = False  # confirms are batched here instead
            conn = self.app.connection_for_write(transport_options=options)
            conn.ensure_connection(max_retries=1)
            channel = conn.default_channel
            channel.confirm_select()
            channel.events["basic_ack"].add(self._on_ack)
            channel.events["basic_nack"].add(self._on_nack)
            self._conn, self._pid, self._next_tag = conn, os.getpid(), 1
            self._outstanding = {}
        return self.app.amqp.Producer(self._conn.default_channel)

    def _settle(self, tag: int, multiple: bool) -> list[UUID]:
        tags = [t for t in self._outstanding if t <= tag] if multiple else [tag]
        return [run_id for t in tags if (run_id := self._outstanding.pop(t, None)) is not None]

    def _on_ack(self, tag: int, multiple: bool) -> None:
        self._acked.update(self._settle(tag, multiple))

    def _on_nack(self, tag: int, multiple: bool) -> None:
        self._settle(tag, multiple)  # not acked: reported as failed

    def close(self) -> None:
        conn, self._conn, self._outstanding = self._conn, None, {}
        if conn is not None:
            try:
                conn.release()
            except Exception:  # already broken
                log.debug("closing the publisher connection failed", exc_info=True)


_publisher: BatchPublisher | None = None


def _batch_publisher() -> BatchPublisher:
    global _publisher
    if _publisher is None or _publisher.app is not current_app._get_current_object():
        _publisher = BatchPublisher(current_app._get_current_object())
    return _publisher


def message_options(run: Run, *, now: datetime) -> dict[str, object]:
    """The Celery message for ``run``: its id, ETA, queue, priority and time limits."""
    task = run.task
    timeout = task.timeout_seconds or settings.TASKS_DEFAULT_TIMEOUT_SECONDS
    options: dict[str, object] = {
        "args": [str(run.id)],
        "task_id": str(run.id),
        "queue": task.queue,
        "priority": task.priority,
        "soft_time_limit": timeout,
        "time_limit": timeout + HARD_LIMIT_GRACE_SECONDS,
        "confirm_timeout": PUBLISH_CONFIRM_TIMEOUT_SECONDS,
    }
    if run.due_at > now:
        options["eta"] = run.due_at
    return options
