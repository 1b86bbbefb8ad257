"""Postgres as Celery's broker: Kombu's SQLAlchemy transport, with two fixes.

The embedded stack (``project.embedded``) carries run messages in the same Postgres that
holds the runs, so one embedded server is the whole infrastructure. ``bench/broker_compare.py``
measured this against Kombu's filesystem transport with atomic writes; the reasons for the
choice are in docs/operations.md. Settings select this class when ``CELERY_BROKER_URL`` is a
``postgres://`` URL (by default: the embedded server's ``DATABASE_URL``).

What differs from ``kombu.transport.sqlalchemy``:

- **Polling interval.** Kombu's virtual transports poll an empty queue every
  ``polling_interval`` seconds (1 s by default: a "run now" would start up to a second late).
  The virtual ``Transport`` reads that key from ``broker_transport_options``, but the stock
  SQLAlchemy channel hands *every* transport option to ``sqlalchemy.create_engine``, which
  raises ``TypeError`` on it. Here the Kombu/Celery-level keys are kept away from the engine,
  so ``polling_interval`` (and ``confirm_publish``) can be set like on any other transport.
- **Delivered messages are deleted.** The stock channel marks a delivered row
  ``visible = false`` and never reads or removes it again (an unacknowledged message lives in
  the worker's memory and goes back through ``_put`` when it is restored), so the table grows
  by one row per message forever and the next-message query slows down with it. Here a
  delivery is one ``DELETE ... RETURNING`` of the oldest row, ``FOR UPDATE SKIP LOCKED`` so two
  consumers never block on the same row.

Delivery semantics are those of every Kombu virtual transport: a message taken by a worker
and not yet acknowledged is restored to the queue when the worker shuts down; a worker killed
outright loses its unacknowledged messages, and the runs behind them are re-published by
beat's recovery (``TASKS_REQUEUE_AFTER_SECONDS``, docs/reliability.md).
"""

from __future__ import annotations

from json import loads
from queue import Empty
from typing import Any

from kombu.transport import sqlalchemy as kombu_sqlalchemy
from sqlalchemy import create_engine, text

# Transport options that are Kombu's or Celery's, never ``create_engine`` arguments.
NOT_ENGINE_OPTIONS = frozenset(
    {
        "queue_tablename",
        "message_tablename",
        "callback",
        "errback",
        "max_retries",
        "interval_start",
        "interval_step",
        "interval_max",
        "retry_errors",
        "polling_interval",
        "confirm_publish",
    }
)


def engine_url(url: str) -> str:
    """``postgres://...`` (Django's and libpq's spelling) as SQLAlchemy's psycopg 3 URL."""
    scheme, sep, rest = url.partition("://")
    if scheme in {"postgres", "postgresql", "pgsql"}:
        return f"postgresql+psycopg://{rest}"
    return url


class Channel(kombu_sqlalchemy.Channel):
    _queue_ids: dict[str, int]

    def _engine_from_config(self) -> Any:
        conninfo = self.connection.client
        options = {
            key: value
            for key, value in conninfo.transport_options.items()
            if key not in NOT_ENGINE_OPTIONS
        }
        options.setdefault("pool_pre_ping", True)
        return create_engine(engine_url(conninfo.hostname), **options)

    def _queue_id(self, queue: str) -> int:
        ids = self.__dict__.setdefault("_queue_ids", {})
        if queue not in ids:
            ids[queue] = int(self._get_or_create(queue).id)
        return ids[queue]

    def _get(self, queue: str, timeout: Any = None) -> Any:
        table = self.message_tablename
        statement = text(
            f"DELETE FROM {table} WHERE id = ("  # noqa: S608 - table name from settings
            f"SELECT id FROM {table} WHERE queue_id = :queue_id AND visible "
            "ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING payload"
        )
        try:
            row = self.session.execute(statement, {"queue_id": self._queue_id(queue)}).first()
            self.session.commit()
        except Exception:
            self.session.rollback()
            raise
        if row is None:
            raise Empty()
        payload = row[0]
        return loads(payload if isinstance(payload, str) else payload.decode())

    def _purge(self, queue: str) -> int:
        self.__dict__.pop("_queue_ids", None)
        return int(super()._purge(queue))


class Transport(kombu_sqlalchemy.Transport):
    Channel = Channel
    # Overridden by broker_transport_options["polling_interval"] (settings set it).
    polling_interval = 0.1
