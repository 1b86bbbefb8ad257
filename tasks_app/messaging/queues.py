"""The queues the product declares on RabbitMQ, and their type (``TASKS_QUEUE_TYPE``).

Every queue a process declares — the default queue, a task's own queue, the queues a worker
consumes with ``-Q`` — goes through Celery's queue table, so this module's ``Queues`` is the
one place that gives them their arguments:

- ``classic`` (the default): Celery's declaration, unchanged — ``x-max-priority`` 10, direct
  exchanges, ETA messages held by the worker that took them.
- ``quorum``: ``x-queue-type: quorum`` (replicated by Raft across the cluster's nodes: a lost
  node loses no queued message) with ``x-delivery-limit``, on topic exchanges so Celery's
  native delayed delivery keeps an ETA message in RabbitMQ (``celery_delayed_*``) until its
  last second; no ``x-max-priority`` (refused on quorum queues). The project's settings
  set the Celery options that go with it; docs/operations.md says what changes.

The app gives this table to the project's Celery app (``tasks_app.celery_defaults``), unless
the project chose an ``amqp`` class of its own.

A queue cannot change type or arguments in place: RabbitMQ answers ``PRECONDITION_FAILED``
(``inequivalent arg ...``) to a declaration that differs from the existing queue.
:func:`explain` turns that into the one line an operator needs, and :func:`check` runs the
declaration up front (a worker at start) so the mismatch is reported once, clearly.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable
from typing import Any

from amqp.exceptions import PreconditionFailed
from celery.app import amqp as celery_amqp
from kombu import Exchange, Queue
from kombu.transport.native_delayed_delivery import (
    bind_queue_to_native_delayed_delivery_exchange,
    declare_native_delayed_delivery_exchanges_and_queues,
)

from ..conf import app_settings

log = logging.getLogger(__name__)

MIGRATION_DOC = "docs/operations.md#quorum-queues"
# Celery's native delayed delivery counts whole seconds (it refuses a countdown under 1 s).
NATIVE_DELAY_MIN_SECONDS = 1.0


def quorum_arguments() -> dict[str, Any]:
    """Arguments of every product queue under ``TASKS_QUEUE_TYPE=quorum``."""
    return {"x-queue-type": "quorum", "x-delivery-limit": app_settings.QUEUE_DELIVERY_LIMIT}


class Queues(celery_amqp.Queues):  # type: ignore[misc]
    """Celery's queue table, giving each queue the arguments of ``TASKS_QUEUE_TYPE``."""

    def __setitem__(self, name: str, queue: Any) -> None:  # a kombu Queue
        if quorum():
            queue.queue_arguments = {**(queue.queue_arguments or {}), **quorum_arguments()}
        super().__setitem__(name, queue)


class AMQP(celery_amqp.AMQP):  # type: ignore[misc]
    queues_cls = Queues


class QueueMismatch(Exception):
    """A queue exists on the broker with other arguments than this process declares."""


def explain(exc: BaseException, queue: str | None = None) -> str | None:
    """The operator's one line for a queue declaration RabbitMQ refused, else ``None``."""
    if not isinstance(exc, PreconditionFailed) or "inequivalent arg" not in str(exc):
        return None
    which = f"queue {queue!r} (or its exchange)" if queue else "a queue or exchange"
    return (
        f"{which} exists on the broker with other arguments than "
        f"TASKS_QUEUE_TYPE={app_settings.QUEUE_TYPE} declares ({exc.reply_text}); "
        f"a queue cannot change type in place: drain and delete it, or use a new vhost "
        f"({MIGRATION_DOC})"
    )


def check(app: Any, names: Iterable[str]) -> None:
    """Declare the queues ``names`` as this process would; raise :class:`QueueMismatch`
    with :func:`explain`'s line if one exists with other arguments."""
    with app.connection_for_write() as conn:
        for name in names:
            queue = app.amqp.queues[name]
            try:
                queue.bind(conn.default_channel).declare()
            except PreconditionFailed as exc:
                raise QueueMismatch(explain(exc, name) or str(exc)) from exc


def on_rabbitmq(url: object) -> bool:
    """Whether the broker URL ``url`` names RabbitMQ (AMQP), not the Postgres broker."""
    return str(url or "").startswith(("amqp://", "amqps://", "pyamqp://"))


def quorum() -> bool:
    return bool(app_settings.QUEUE_TYPE == "quorum")


def natively_delayed(delay: float) -> bool:
    """Whether a message due ``delay`` seconds from now goes through Celery's native delayed
    delivery (under ``quorum``, at least a second ahead: RabbitMQ holds it)."""
    return quorum() and delay >= NATIVE_DELAY_MIN_SECONDS


# The due lane of queue ``q`` is ``q`` + this: see :func:`lane`.
LANE_SUFFIX = ".due"


def lane(name: str) -> str:
    """The due lane of queue ``name``: where runs whose due instant was *set* (a schedule's
    fire, a delay, ``at``, ``run_after``, a retry's backoff) are published, while runs due
    "as soon as possible" (run now, ``enqueue`` without ``run_after``, backfills) go to
    ``name`` itself. Every worker consumes a queue's lane beside it
    (``tasks_app.worker.startup``), and the broker hands a worker's consumers messages in
    turn, so a due run is delivered after at most one message of a backlog however long the
    backlog is: on classic and quorum queues alike (quorum queues have no priorities before
    RabbitMQ 4.0, and four levels after). Lanes stay almost empty: a few due runs at a time.
    """
    return name + LANE_SUFFIX


def is_lane(name: str) -> bool:
    return name.endswith(LANE_SUFFIX)


def destination(name: str, *, delay: float) -> str | Queue:
    """The ``queue`` option of a message for queue ``name`` (a queue or its :func:`lane`)
    due ``delay`` seconds from now.

    Under ``quorum``, a message due at least a second ahead goes through Celery's native
    delayed delivery: RabbitMQ holds it (``celery_delayed_*``, whole seconds, so it arrives
    under a second early) and the worker's timer starts it on the instant, as for any ETA.
    One due sooner goes straight into the queue through the default exchange (Celery would
    refuse its countdown) and the worker's timer holds it for that fraction of a second.
    """
    if quorum() and 0 < delay < NATIVE_DELAY_MIN_SECONDS:
        return Queue(name, Exchange(""), routing_key=name, queue_arguments=quorum_arguments())
    return name


class _DefaultExchangeWarning(logging.Filter):
    """Drops Celery's warning that a direct exchange cannot delay natively for the default
    (nameless) exchange: :func:`destination` uses it on purpose, for sub-second delays."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "\n is a direct exchange" not in record.getMessage()


logging.getLogger("celery.app.base").addFilter(_DefaultExchangeWarning())

_prepared: set[tuple[int, str]] = set()
_refused_until: dict[tuple[int, str], float] = {}  # a refused queue is tried again after this
_prepare_lock = threading.Lock()
_ALL = ""  # key of the delayed-delivery exchanges themselves
RETRY_REFUSED_SECONDS = 30.0


def prepare_delayed_delivery(app: Any, names: Iterable[str]) -> set[str]:
    """Make sure a delayed message for each queue in ``names`` has a way to its queue.

    Celery's workers declare the ``celery_delayed_*`` exchanges and bind the queues they
    consume; a publisher that ran first (beat, web) would have its messages refused (no
    exchange) or dropped (no binding). So the publisher does it too, once per process and
    queue: declare the queue (the check that it has the expected type), the exchanges, the
    binding. Returns the names that failed, each logged in one line (then left alone for
    ``RETRY_REFUSED_SECONDS``, not retried on every release pass); their runs stay pending.
    """
    pid, now = os.getpid(), time.monotonic()
    wanted = {name for name in names if (pid, name) not in _prepared}
    failed = {name for name in wanted if _refused_until.get((pid, name), 0.0) > now}
    todo = wanted - failed
    if not todo:
        return failed
    with _prepare_lock, app.connection_for_write() as conn:
        if (pid, _ALL) not in _prepared:
            declare_native_delayed_delivery_exchanges_and_queues(
                conn, app.conf.broker_native_delayed_delivery_queue_type
            )
            _prepared.add((pid, _ALL))
        for name in todo:
            queue = app.amqp.queues[name]
            try:
                queue.bind(conn.channel()).declare()
                bind_queue_to_native_delayed_delivery_exchange(conn, queue)
            except Exception as exc:
                log.error("queue %r cannot take delayed runs: %s", name, explain(exc, name) or exc)
                _refused_until[(pid, name)] = now + RETRY_REFUSED_SECONDS
                failed.add(name)
            else:
                _prepared.add((pid, name))
    return failed
