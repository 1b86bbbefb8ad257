"""Which beat replica fires: exactly one leader, the others stand by and take over.

The leader holds a session-level advisory lock (``pg_try_advisory_lock``) on a dedicated
connection that lives as long as the beat process. When the leader dies (even ``kill -9``)
its socket closes, Postgres drops the session and its lock at once, and the next standby to
try (every ``TASKS_BEAT_TICK_SECONDS``) becomes leader: takeover takes about one tick. The
leader checks its connection on every leadership check; if the connection broke (Postgres
restart, network), it assumes the lock is gone and competes again like a standby.

Leadership is about efficiency and tidy logs, not correctness: fires are unique by
``(task, scheduled_for)`` and releases take rows with ``SKIP LOCKED``, so even two leaders
for a moment (a leader cut off from Postgres finishing its tick) record nothing twice.
A leader that hangs while keeping its connection open keeps the lock; a liveness probe
(``/api/health`` reports the beat heartbeat) is the remedy, as for any single owner.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Protocol

from django.db import connection

from .. import store
from ..conf import app_settings

log = logging.getLogger(__name__)


class Leadership(Protocol):
    def is_leader(self) -> bool:
        """Whether this process leads now; tries to become leader when it does not."""
        ...

    def release(self) -> None:
        """Give leadership up (clean shutdown)."""
        ...


class AdvisoryLockLeadership:
    """Leader while holding ``pg_advisory_lock(key)`` on a connection of its own.

    The connection is not Django's (which ``close_old_connections`` may close between
    ticks); it is opened with TCP keepalives so a silently vanished peer is noticed.
    """

    def __init__(self, *, key: int, connect_params: dict[str, Any], name: str = "") -> None:
        self.key = key
        self.connect_params = connect_params
        self.name = name or f"pid {os.getpid()}"
        self._conn: Any = None
        self._leader = False

    def is_leader(self) -> bool:
        try:
            if self._leader:
                store.leader_ping(self._conn)  # still connected, so still holding the lock
                return True
            if self._conn is None:
                self._conn = self._connect()
            if store.leader_lock(self._conn, key=self.key):
                self._leader = True
                log.info("beat leadership acquired by %s (advisory lock %d)", self.name, self.key)
            return self._leader
        except Exception as exc:
            if self._leader:
                log.warning("beat leadership lost by %s: %s", self.name, exc)
            self._drop()
            return False

    def release(self) -> None:
        if self._leader:
            log.info("beat leadership released by %s", self.name)
        self._drop()

    def _connect(self) -> Any:
        import psycopg

        params = {
            **self.connect_params,
            "autocommit": True,
            "connect_timeout": 5,
            "application_name": "tasks-beat-leadership",
            "keepalives": 1,
            "keepalives_idle": 5,
            "keepalives_interval": 2,
            "keepalives_count": 2,
        }
        return psycopg.connect(**params)

    def _drop(self) -> None:
        conn, self._conn, self._leader = self._conn, None, False
        if conn is not None:
            try:
                conn.close()  # closing the session releases the lock
            except Exception:  # already broken
                log.debug("closing the leadership connection failed", exc_info=True)


def leadership_for_database(*, name: str = "") -> Leadership:
    """The advisory-lock leadership on the default database (``TASKS_BEAT_LOCK_KEY``)."""
    return AdvisoryLockLeadership(
        key=app_settings.BEAT_LOCK_KEY,
        connect_params=connection.get_connection_params(),
        name=name,
    )


class CachedLeadership:
    """Asks the underlying leadership at most once per ``interval`` seconds."""

    def __init__(self, inner: Leadership, *, interval: float) -> None:
        self.inner = inner
        self.interval = interval
        self._checked_at = -float("inf")
        self._leader = False

    def is_leader(self) -> bool:
        now = time.monotonic()
        if now - self._checked_at >= self.interval:
            self._leader = self.inner.is_leader()
            self._checked_at = now
        return self._leader

    def release(self) -> None:
        self.inner.release()
        self._leader = False
