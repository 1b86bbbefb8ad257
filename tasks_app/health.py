"""Health of the system as the web process sees it: database, broker, cache, beat, workers.

``/api/health`` calls :func:`check_all`. The beat heartbeat is written by the beat process
itself (``TaskScheduler.tick`` calls :func:`record_beat_tick` every tick) into the Django
cache, so the web process can tell how long ago beat last ticked without a table or a
message. Every check is bounded in time and never raises: a check that fails reports
``ok: false`` with the reason.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

log = logging.getLogger(__name__)

BEAT_TICK_KEY = "tasks:health:beat-tick"
CACHE_PROBE_KEY = "tasks:health:probe"
BROKER_TIMEOUT_SECONDS = 2.0


@dataclass
class Check:
    ok: bool
    latency_ms: float
    error: str = ""
    info: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"ok": self.ok, "latency_ms": self.latency_ms, **self.info}
        if self.error:
            data["error"] = self.error
        return data


def record_beat_tick(now: datetime) -> None:
    """Store beat's heartbeat (the instant of its latest tick). Never raises: a cache outage
    must not stop beat from firing schedules."""
    try:
        cache.set(BEAT_TICK_KEY, now.isoformat(), timeout=None)
    except Exception:  # the cache is optional for beat's real work
        log.warning("could not record the beat heartbeat in the cache", exc_info=True)


def last_beat_tick() -> datetime | None:
    value = cache.get(BEAT_TICK_KEY)
    return parse_datetime(value) if isinstance(value, str) else None


def _describe(exc: BaseException) -> str:
    text = str(exc)
    # Connection errors may quote a URL with credentials; keep only the exception kind then.
    if "://" in text or "@" in text:
        return type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


def _timed(probe: Any) -> Check:
    start = time.monotonic()
    try:
        info = probe() or {}
        ok, error = True, ""
        if "ok" in info:
            ok = bool(info.pop("ok"))
            error = str(info.pop("error", ""))
    except Exception as exc:  # a health check reports failures, it does not raise them
        info, ok, error = {}, False, _describe(exc)
    return Check(
        ok=ok, latency_ms=round((time.monotonic() - start) * 1000, 1), error=error, info=info
    )


def check_database() -> Check:
    def probe() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()

    return _timed(probe)


def _broker_connection() -> Any:
    from project.celery import app

    # Read the URL from settings at call time (not the app's import-time copy), so a
    # deployment or a test that changes CELERY_BROKER_URL is what gets checked.
    return app.connection_for_write(
        url=settings.CELERY_BROKER_URL, connect_timeout=BROKER_TIMEOUT_SECONDS
    )


def check_broker() -> Check:
    def probe() -> None:
        with _broker_connection() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, timeout=BROKER_TIMEOUT_SECONDS)

    return _timed(probe)


def check_cache() -> Check:
    def probe() -> dict[str, Any]:
        token = str(time.time_ns())
        cache.set(CACHE_PROBE_KEY, token, timeout=30)
        if cache.get(CACHE_PROBE_KEY) != token:
            return {"ok": False, "error": "a value written to the cache did not read back"}
        return {}

    return _timed(probe)


def check_beat(now: datetime | None = None) -> Check:
    def probe() -> dict[str, Any]:
        last = last_beat_tick()
        if last is None:
            return {
                "ok": False,
                "error": "no beat heartbeat recorded",
                "last_tick": None,
                "age_seconds": None,
            }
        age = round(((now or timezone.now()) - last).total_seconds(), 3)
        limit = settings.TASKS_HEALTH_BEAT_MAX_AGE_SECONDS
        info: dict[str, Any] = {"last_tick": last.isoformat(), "age_seconds": age}
        if age > limit:
            info.update(ok=False, error=f"last beat tick {age:.0f} s ago (limit {limit:g} s)")
        return info

    return _timed(probe)


def check_workers() -> Check:
    def probe() -> dict[str, Any]:
        with _broker_connection() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, timeout=BROKER_TIMEOUT_SECONDS)
            from project.celery import app

            replies = (
                app.control.ping(
                    timeout=settings.TASKS_HEALTH_WORKER_TIMEOUT_SECONDS, connection=conn
                )
                or []
            )
        count = len(replies)
        if not count:
            return {"ok": False, "error": "no worker answered a ping", "count": 0}
        return {"count": count}

    return _timed(probe)


CHECKS: dict[str, Callable[[], Check]] = {
    "database": check_database,
    "broker": check_broker,
    "cache": check_cache,
    "beat": check_beat,
    "workers": check_workers,
}


def check_all() -> dict[str, Check]:
    """Every check, in a fixed order (database, broker, cache, beat, workers)."""
    return {name: check() for name, check in CHECKS.items()}
