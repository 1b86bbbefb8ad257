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
- **No idle sleep while the queue has messages.** The virtual transport sleeps
  ``polling_interval`` after every empty turn, including the turns where the worker could
  not take a message because its prefetch window was full (``acks_late`` with prefetch 1):
  then every acknowledgement waits up to a full interval before the next message is fetched,
  which capped a worker's throughput at one message per interval and process. Here only a turn that
  found the queue empty sleeps the full interval; a turn blocked by the prefetch window
  backs off from 1 ms up to it.
- **One statement per message.** Publishing is a plain ``INSERT`` (the stock channel goes
  through the ORM's unit of work, costly Python per message), and the queue's id is
  looked up once per channel.
- **A closed channel returns its database connection** to the pool at once.
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

import threading
import time
from json import dumps, loads
from queue import Empty
from typing import Any

from kombu.transport import sqlalchemy as kombu_sqlalchemy
from kombu.transport.sqlalchemy import models as kombu_models
from sqlalchemy import create_engine, text

# Serializes the creation of Kombu's tables across processes (an advisory lock key).
TABLES_LOCK_KEY = 0x6B6F6D6275  # "kombu"
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
    """The channel's SQLAlchemy session is used by one thread at a time: a worker's event loop
    takes messages while its pool's result thread hands rejected ones back (``_put``); two
    threads in one session crashed the worker (``IllegalStateChangeError``)."""

    _queue_ids: dict[str, int]

    @property
    def _session_lock(self) -> threading.RLock:
        lock: threading.RLock = self.__dict__.setdefault("_lock", threading.RLock())
        return lock

    def _new_queue(self, queue: str, **kwargs: Any) -> None:
        with self._session_lock:
            super()._new_queue(queue, **kwargs)

    def _size(self, queue: str) -> int:
        with self._session_lock:
            return int(super()._size(queue))

    def _engine_from_config(self) -> Any:
        conninfo = self.connection.client
        options = {
            key: value
            for key, value in conninfo.transport_options.items()
            if key not in NOT_ENGINE_OPTIONS
        }
        options.setdefault("pool_pre_ping", True)
        # Taking a message is a DELETE, and a commit that waits for its WAL flush costs a
        # disk flush per message, which bounds how many a worker takes a second. Without the
        # wait, a Postgres crash (not a process crash) can forget the last few hundred ms of
        # broker writes: a taken message comes back (the worker's claim ignores the
        # duplicate) or a published one is lost (beat's recovery publishes the run again).
        # Runs themselves are committed by Django, with the server's own setting.
        options.setdefault("connect_args", {"options": "-c synchronous_commit=off"})
        engine = create_engine(engine_url(conninfo.hostname), **options)
        # Kombu creates its tables on first use (``metadata.create_all`` in ``_open``); web,
        # worker and beat starting together raced on it (``CREATE SEQUENCE`` → unique
        # violation, and the worker died). Created here first, one process at a time.
        with engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": TABLES_LOCK_KEY})
            kombu_models.metadata.create_all(conn)
        return engine

    def _queue_id(self, queue: str) -> int:
        ids = self.__dict__.setdefault("_queue_ids", {})
        if queue not in ids:
            ids[queue] = int(self._get_or_create(queue).id)
        return ids[queue]

    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        statement = text(
            f"INSERT INTO {self.message_tablename} (id, queue_id, visible, payload, version) "  # noqa: S608
            "VALUES (nextval('message_id_sequence'), :queue_id, true, :payload, 1)"
        )
        with self._session_lock:
            try:
                self.session.execute(
                    statement, {"queue_id": self._queue_id(queue), "payload": dumps(payload)}
                )
                self.session.commit()
            except Exception:
                self.session.rollback()
                raise

    def _get(self, queue: str, timeout: Any = None) -> Any:
        table = self.message_tablename
        statement = text(
            f"DELETE FROM {table} WHERE id = ("  # noqa: S608 - table name from settings
            f"SELECT id FROM {table} WHERE queue_id = :queue_id AND visible "
            "ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING payload"
        )
        with self._session_lock:
            try:
                row = self.session.execute(statement, {"queue_id": self._queue_id(queue)}).first()
                self.session.commit()
            except Exception:
                self.session.rollback()
                raise
        if row is None:
            self.connection.queue_was_empty = True
            raise Empty()
        payload = row[0]
        return loads(payload if isinstance(payload, str) else payload.decode())

    def close(self) -> None:
        """Also give the session's database connection back to the pool (the stock channel
        keeps it until the channel is garbage-collected: every short-lived connection, such
        as a health check's, held a pooled connection until then)."""
        try:
            super().close()
        finally:
            session, self._session = self._session, None
            if session is not None:
                session.close()

    def _purge(self, queue: str) -> int:
        with self._session_lock:
            self.__dict__.pop("_queue_ids", None)
            return int(super()._purge(queue))


class Transport(kombu_sqlalchemy.Transport):
    Channel = Channel
    # Overridden by broker_transport_options["polling_interval"] (settings set it).
    polling_interval = 0.1
    # A turn that could not consume (prefetch window full) waits this long, doubling up to
    # polling_interval while it stays full.
    busy_wait = 0.001
    queue_was_empty = False

    def drain_events(self, connection: Any, timeout: Any = None) -> None:  # type: ignore[override]
        cycle = self.cycle
        assert cycle is not None  # set in __init__
        started = time.monotonic()
        busy_wait = self.busy_wait
        while True:
            self.queue_was_empty = False
            try:
                cycle.get(self._deliver, timeout=timeout)
                return
            except Empty:
                pass
            if timeout is not None and time.monotonic() - started >= timeout:
                raise TimeoutError()
            interval = self.polling_interval or 0.0
            if self.queue_was_empty:
                pause = interval
            else:
                pause, busy_wait = busy_wait, min(busy_wait * 2, interval)
            if timeout is not None:
                pause = min(pause, max(timeout - (time.monotonic() - started), 0.0))
            time.sleep(pause)
