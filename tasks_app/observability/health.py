"""Health of the system as the web process sees it: database, broker, cache, beat, workers.

``/api/health`` calls :func:`check_all`. The beat heartbeat is written by the beat process
itself (``TaskScheduler.tick`` calls :func:`record_beat_tick` every tick) into the Django
cache, so the web process can tell how long ago beat last ticked without a table or a
message. Every check is bounded in time and never raises: a check that fails reports
``ok: false`` with the reason.

Workers are counted by a broadcast ping where the broker can broadcast (RabbitMQ, Redis).
Postgres as the broker (the embedded stack, ``tasks_app.broker``) cannot: there each worker's
main process writes its own heartbeat into the cache every ``WORKER_HEARTBEAT_SECONDS``
(:func:`start_worker_heartbeat`) and removes it when it shuts down; a worker counts as alive
while its heartbeat is younger than three periods.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from celery import current_app
from celery.signals import worker_ready, worker_shutdown
from django.conf import settings
from django.core.cache import cache
from django.utils.dateparse import parse_datetime

from .. import store
from ..checks import beat_scheduler_problem
from ..conf import app_settings
from ..runtime import clock
from ..runtime.cache_keys import cache_key

log = logging.getLogger(__name__)

# The app's names in the cache (``cache_keys.cache_key``: under this database's namespace).
BEAT_TICK = "health:beat-tick"
# How long beat's last tick took, in the cache (``cache_keys.cache_key``): /metrics exports it.
BEAT_TICK_DURATION = "beat:tick"
CACHE_PROBE = "health:probe"
BROKER_TIMEOUT_SECONDS = 2.0
WORKER_HEARTBEAT = "health:worker:{}"
WORKER_NAMES = "health:workers"
WORKER_HEARTBEAT_SECONDS = 5.0
CLOCK = "health:clock:{}"
CLOCK_NAMES = "health:clocks"
CLOCK_RECORD_SECONDS = 5.0
_clock_recorded: dict[str, float] = {}  # process name -> when it last recorded (monotonic)
PUBLIC_ERROR = "unreachable or misconfigured (details for staff)"


@dataclass
class Check:
    ok: bool
    latency_ms: float
    error: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    private: frozenset[str] = frozenset()  # keys of info shown only with details

    def as_dict(self, *, details: bool = True) -> dict[str, Any]:
        """The check as JSON. Without ``details`` (anonymous callers) a failure says only
        that the part is unreachable or misconfigured: its message can name an internal
        host, port or database role (and so can the ``private`` fields: hostnames)."""
        info = (
            self.info if details else {k: v for k, v in self.info.items() if k not in self.private}
        )
        data: dict[str, Any] = {"ok": self.ok, "latency_ms": self.latency_ms, **info}
        if self.error:
            data["error"] = self.error if details else PUBLIC_ERROR
        return data


def record_beat_tick(now: datetime) -> None:
    """Store beat's heartbeat (the instant of its latest tick), and its clock's offset.
    Never raises: a cache outage must not stop beat from firing schedules."""
    try:
        cache.set(cache_key(BEAT_TICK), now.isoformat(), timeout=None)
    except Exception:  # the cache is optional for beat's real work
        log.warning("could not record the beat heartbeat in the cache", exc_info=True)
    record_clock(f"beat@{socket.gethostname()} pid {os.getpid()}")


def process_name() -> str:
    """This process as the clock check names it, when it is not beat or a worker."""
    return f"web@{socket.gethostname()} pid {os.getpid()}"


def record_clock(name: str) -> None:
    """Store how far this process's host clock is off the database's (``tasks_app.runtime.clock``),
    at most every ``CLOCK_RECORD_SECONDS``; kept three periods. Never raises."""
    mono = time.monotonic()
    if mono < _clock_recorded.get(name, float("-inf")) + CLOCK_RECORD_SECONDS:
        return
    skew = clock.skew_seconds()
    if skew is None:
        return
    try:
        cache.set(_clock_key(name), round(skew, 3), timeout=3 * CLOCK_RECORD_SECONDS)
        _remember(CLOCK_NAMES, name)
        _clock_recorded[name] = mono
    except Exception:  # the cache is optional for the process's real work
        log.warning("could not record this process's clock offset in the cache", exc_info=True)


def _clock_key(name: str) -> str:
    return cache_key(CLOCK.format(re.sub(r"[^\w@.-]", "_", name)))


def clock_offsets() -> dict[str, float]:
    """{process: its host clock minus the database's, in seconds} for the processes that
    recorded one lately (beat, workers), and this one."""
    names = cache.get(cache_key(CLOCK_NAMES)) or []
    found = cache.get_many([_clock_key(name) for name in names])
    offsets = {name: found[_clock_key(name)] for name in names if _clock_key(name) in found}
    skew = clock.skew_seconds()
    if skew is not None:
        offsets[process_name()] = round(skew, 3)
    return offsets


def last_beat_tick() -> datetime | None:
    value = cache.get(cache_key(BEAT_TICK))
    return parse_datetime(value) if isinstance(value, str) else None


def _remember(names_key: str, name: str) -> None:
    """Add ``name`` to the list under ``names_key`` (the cache cannot list keys: the names
    of per-process entries are kept apart)."""
    names = cache.get(cache_key(names_key)) or []
    if name not in names:
        cache.set(cache_key(names_key), sorted({*names, name})[-1000:], timeout=None)


def record_worker_heartbeat(hostname: str, now: datetime) -> None:
    """Store a worker's heartbeat; it expires after three periods. Never raises."""
    try:
        cache.set(
            cache_key(WORKER_HEARTBEAT.format(hostname)),
            now.isoformat(),
            timeout=3 * WORKER_HEARTBEAT_SECONDS,
        )
        _remember(WORKER_NAMES, hostname)
    except Exception:  # the cache is optional for a worker's real work
        log.warning("could not record the worker heartbeat in the cache", exc_info=True)


def live_workers() -> list[str]:
    """Hostnames of the workers whose heartbeat has not expired."""
    names = cache.get(cache_key(WORKER_NAMES)) or []
    found = cache.get_many([cache_key(WORKER_HEARTBEAT.format(name)) for name in names])
    return [name for name in names if cache_key(WORKER_HEARTBEAT.format(name)) in found]


@worker_ready.connect
def start_worker_heartbeat(sender: Any = None, **_: Any) -> None:
    """In a worker's main process: a thread that records the heartbeat until shutdown."""
    hostname = str(getattr(sender, "hostname", "") or "worker")
    stopped = threading.Event()

    def beat() -> None:
        while True:
            record_worker_heartbeat(hostname, clock.now())
            record_clock(f"{hostname} pid {os.getpid()}")
            if stopped.wait(WORKER_HEARTBEAT_SECONDS):
                return

    def stop(**_: Any) -> None:
        stopped.set()
        try:
            cache.delete(cache_key(WORKER_HEARTBEAT.format(hostname)))
        except Exception:  # expires by itself
            log.warning("could not remove the worker heartbeat", exc_info=True)

    worker_shutdown.connect(stop, weak=False)
    threading.Thread(target=beat, name="worker-heartbeat", daemon=True).start()


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
    return _timed(store.ping)


def _broker_connection() -> Any:
    # The project's Celery app (Celery makes the app a project creates the current one).
    # Read the URL from settings at call time (not the app's import-time copy), so a
    # deployment or a test that changes CELERY_BROKER_URL is what gets checked.
    return current_app.connection_for_write(
        url=settings.CELERY_BROKER_URL, connect_timeout=BROKER_TIMEOUT_SECONDS
    )


def check_broker() -> Check:
    def probe() -> None:
        with _broker_connection() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, timeout=BROKER_TIMEOUT_SECONDS)

    return _timed(probe)


def check_cache() -> Check:
    def probe() -> dict[str, Any]:
        # A key of its own per probe: two web processes probing at once on one shared key
        # read each other's token and reported a healthy cache as down (bench/hammer.py).
        token = f"{os.getpid()}-{time.time_ns()}"
        key = cache_key(f"{CACHE_PROBE}:{token}")
        cache.set(key, token, timeout=30)
        try:
            if cache.get(key) != token:
                return {"ok": False, "error": "a value written to the cache did not read back"}
        finally:
            cache.delete(key)
        return {}

    return _timed(probe)


def _beat_down(error: str) -> str:
    """The "beat down" message, with the likely cause when ``CELERY_BEAT_SCHEDULER`` is not
    the app's scheduler (another scheduler records no heartbeat: check ``tasks_app.W001``)."""
    problem = beat_scheduler_problem()
    return f"{error}; likely cause: {problem}" if problem else error


def check_beat(now: datetime | None = None) -> Check:
    def probe() -> dict[str, Any]:
        last = last_beat_tick()
        if last is None:
            return {
                "ok": False,
                "error": _beat_down("no beat heartbeat recorded"),
                "last_tick": None,
                "age_seconds": None,
            }
        age = round(((now or clock.now()) - last).total_seconds(), 3)
        limit = app_settings.HEALTH_BEAT_MAX_AGE_SECONDS
        info: dict[str, Any] = {"last_tick": last.isoformat(), "age_seconds": age}
        if age > limit:
            error = _beat_down(f"last beat tick {age:.0f} s ago (limit {limit:g} s)")
            info.update(ok=False, error=error)
        return info

    return _timed(probe)


def check_workers() -> Check:
    def probe() -> dict[str, Any]:
        with _broker_connection() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, timeout=BROKER_TIMEOUT_SECONDS)
            if not conn.supports_exchange_type("fanout"):  # no broadcast: heartbeats
                count = len(live_workers())
                if not count:
                    return {"ok": False, "error": "no worker heartbeat is recent", "count": 0}
                return {"count": count}
            replies = (
                current_app.control.ping(
                    timeout=app_settings.HEALTH_WORKER_TIMEOUT_SECONDS, connection=conn
                )
                or []
            )
        count = len(replies)
        if not count:
            return {"ok": False, "error": "no worker answered a ping", "count": 0}
        return {"count": count}

    return _timed(probe)


def check_clock() -> Check:
    """Whether every process's host clock is within ``TASKS_CLOCK_SKEW_WARN_SECONDS`` of
    the database's. Advisory: the system keeps to the database's clock whatever the hosts
    say (``tasks_app.runtime.clock``), so an offset never makes the system unhealthy."""

    def probe() -> dict[str, Any]:
        bound = app_settings.CLOCK_SKEW_WARN_SECONDS
        offsets = clock_offsets()
        skewed = sorted(name for name, skew in offsets.items() if abs(skew) > bound)
        info: dict[str, Any] = {"bound_seconds": bound, "processes": offsets, "skewed": skewed}
        if skewed:
            worst = max(skewed, key=lambda name: abs(offsets[name]))
            way = "ahead of" if offsets[worst] > 0 else "behind"
            info.update(
                ok=False,
                error=f"{len(skewed)} process clock(s) off the database's by more than "
                f"{bound:g} s; {worst}: {abs(offsets[worst]):.1f} s {way} it",
            )
        return info

    check = _timed(probe)
    check.private = frozenset({"processes", "skewed"})
    return check


CHECKS: dict[str, Callable[[], Check]] = {
    "database": check_database,
    "broker": check_broker,
    "cache": check_cache,
    "beat": check_beat,
    "workers": check_workers,
}


# Checks that say something is off without the system being down.
ADVISORY: dict[str, Callable[[], Check]] = {"clock": check_clock}


def check_all() -> dict[str, Check]:
    """Every check, in a fixed order (database, broker, cache, beat, workers; then the
    advisory clock check)."""
    return {name: check() for name, check in {**CHECKS, **ADVISORY}.items()}


# --- beat heartbeat -----------------------------------------------------------------------


def beat_tick_record(*, duration_seconds: float) -> None:
    """Called by beat after every leader pass: how long it took (when beat last ticked is
    :func:`last_beat_tick`).

    Never raises (a cache outage must not stop beat).
    """
    try:
        cache.set(cache_key(BEAT_TICK_DURATION), duration_seconds, None)
    except Exception:
        log.warning("could not record the beat heartbeat", exc_info=True)


def beat_tick_duration_get() -> float | None:
    """How long beat's last tick took, in seconds, or ``None`` if never recorded."""
    value = cache.get(cache_key(BEAT_TICK_DURATION))
    return float(value) if isinstance(value, (int, float)) else None
