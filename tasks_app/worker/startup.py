"""What a worker process sets up for itself at start, whatever the project's settings say
(``tasks_app.celery_defaults`` has what every process shares):

- **Its database connection is kept across runs.** Celery's Django fixup closes every
  connection before and after each task unless ``CELERY_DB_REUSE_MAX`` is set, and Django
  closes one at each check when ``CONN_MAX_AGE`` is 0 (Django's default): a new Postgres
  connection (and server process) per run. In a worker the app keeps it instead, for
  ``WORKER_CONN_MAX_AGE`` seconds, health-checked after idling (``tasks_app.worker.celery_tasks``), unless
  the project set ``CELERY_DB_REUSE_MAX`` or a ``CONN_MAX_AGE`` of its own.
- **Due lanes.** A worker consumes, beside each queue it consumes, that queue's due lane
  (``tasks_app.messaging.queues.lane``), where runs whose due instant was set (schedule fires, delays,
  ``run_after``, retries) are published, so that none waits behind a backlog of runs due "as
  soon as possible".
- **ETAs on the database's clock.** Celery turns a message's ETA into a monotonic deadline
  with the host's wall clock (``kombu.asynchronous.timer.to_timestamp``): a worker whose clock
  is an hour ahead would start a delayed run at once, one an hour behind would hold it an hour
  late. The worker converts it with the database's clock instead (``tasks_app.runtime.clock``); once
  converted, the wait is monotonic and a later step of the wall clock does not move it.
  The clock is read before the worker consumes; how far the host's is off is logged once
  Celery has set up logging (a line with its level, in the worker's log format).
- **Queue declarations checked** before consuming: a queue that exists with another type or
  other arguments stops the worker with one line (``tasks_app.messaging.queues.explain``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, tzinfo
from time import monotonic
from typing import Any

from celery.signals import celeryd_after_setup, worker_init
from celery.worker import strategy
from django.conf import settings

from ..messaging import queues
from ..runtime import clock

log = logging.getLogger(__name__)

# How long a worker keeps a database connection when the project's CONN_MAX_AGE is 0.
WORKER_CONN_MAX_AGE = 600
# Celery's Django fixup closes connections every this many tasks (never, in practice).
DB_REUSE_MAX = 10**12


@worker_init.connect
def keep_database_connections(sender: Any = None, **_: Any) -> None:
    """Before the pool forks: connections outlive a run (see the module's docstring)."""
    for database in settings.DATABASES.values():
        if database.get("CONN_MAX_AGE", 0) == 0:
            database["CONN_MAX_AGE"] = WORKER_CONN_MAX_AGE
            database["CONN_HEALTH_CHECKS"] = True
    app = getattr(sender, "app", None)
    if app is None or app.conf.get("CELERY_DB_REUSE_MAX") is not None:
        return
    for fixup in getattr(app, "_fixups", ()):
        worker_fixup = getattr(fixup, "worker_fixup", None)
        if worker_fixup is not None and not worker_fixup.db_reuse_max:
            worker_fixup.db_reuse_max = DB_REUSE_MAX


def eta_deadline(eta: Any, default_timezone: tzinfo = UTC, time: Any = monotonic) -> Any:
    """``kombu``'s ``to_timestamp`` for an ETA (a monotonic deadline), on the database's
    clock instead of the host's."""
    if not isinstance(eta, datetime):
        return eta
    if eta.tzinfo is None:
        eta = eta.replace(tzinfo=default_timezone)
    return max((eta - clock.now()).total_seconds() + time(), 0)


@worker_init.connect
def etas_on_the_database_clock(**_: Any) -> None:
    """Before the worker consumes: its ETAs wait by the database's clock (module docstring)."""
    strategy.to_timestamp = eta_deadline
    clock.read(check=False)  # logging is not set up yet: the offset is checked below


@celeryd_after_setup.connect
def clock_offset_logged(**_: Any) -> None:
    """Once Celery has set up logging: say whether this host's clock is off the database's
    (a WARNING past ``TASKS_CLOCK_SKEW_WARN_SECONDS``, ``tasks_app.runtime.clock``)."""
    clock.skew_seconds()


@celeryd_after_setup.connect
def consume_due_lanes(sender: str, instance: Any, **_: Any) -> None:
    """After ``-Q`` is applied: add each consumed queue's due lane, then check every
    declaration (on RabbitMQ) so a mismatch stops the worker with one line."""
    table = instance.app.amqp.queues
    for name in list(table.consume_from):
        if not queues.is_lane(name):
            table.select_add(queues.lane(name))
    if not queues.on_rabbitmq(instance.app.conf.broker_url):
        return
    try:
        queues.check(instance.app, list(table.consume_from))
    except queues.QueueMismatch as exc:
        raise SystemExit(f"worker {sender}: {exc}") from None
