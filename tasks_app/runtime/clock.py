"""The one clock: the database's. Every decision that compares an instant with "now" (a fire,
a release, an ETA, a claim, a deadline, a lease, a retry's backoff, an alarm, a health age, a
first fire, a delay, a ``run_at`` check) takes it from :func:`now`, never from the host.

:func:`now` is the database's ``clock_timestamp()``, read once and carried forward by the
host's monotonic clock, which a step of the wall clock (an NTP correction, a VM resumed, an
operator's ``date -s``) does not move. The reading is renewed every
``TASKS_CLOCK_SYNC_SECONDS`` (and on first use in a process); it is off from the database's
own clock by at most half the round trip of that one ``SELECT`` plus the two clocks' drift
since (parts per million). So every process of the system, whatever its host's wall clock
says, agrees on "now" to within milliseconds, and no extra statement is sent per decision.

The host's wall clock is still read, only to say how far off it is (:func:`skew_seconds`):
a process whose clock is off by more than ``TASKS_CLOCK_SKEW_WARN_SECONDS`` logs a warning
(again when the offset changes by that much, and when it comes back), and beat and workers
report their offset to ``/api/health`` and ``/metrics`` (``observability.health``). Nothing
is decided on it. docs/reliability.md ("The clock") says what each process's clock may be
off by and what happens then.

When the database cannot be read, :func:`now` answers the last reading carried forward, or,
before any reading, the host's clock (the statement that would act on it fails anyway).
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

from django.db import connection
from django.utils import timezone

from .. import store
from ..conf import app_settings

log = logging.getLogger(__name__)

# After a failed reading, wait this long before trying again (the database is down or this
# thread may not touch it): not one failed connection attempt per decision.
RETRY_SECONDS = 1.0


class DatabaseClock:
    """The database's clock as seen from this process (one per process; a fork inherits the
    reading, which stays right: the monotonic clock is the host's, shared by its processes)."""

    def __init__(self) -> None:
        # (the database's instant, the monotonic instant it was read at), replaced whole so
        # that threads never see half of a new reading.
        self._reading: tuple[datetime, float] | None = None
        self._read_at = float("-inf")
        self._retry_at = float("-inf")
        self._warned: float | None = None  # the offset last warned about

    def now(self) -> datetime:
        mono = time.monotonic()
        if mono - self._read_at >= app_settings.CLOCK_SYNC_SECONDS and mono >= self._retry_at:
            self.read()
        reading = self._reading
        if reading is None:
            return timezone.now()
        instant, at = reading
        return instant + timedelta(seconds=time.monotonic() - at)

    def read(self, *, check: bool = True) -> None:
        """Read the database's clock now (also what :func:`now` does every
        ``TASKS_CLOCK_SYNC_SECONDS``), then :meth:`check` the host's offset unless
        ``check`` is false (a process whose logging is not set up yet checks later)."""
        try:
            before = time.monotonic()
            instant = store.database_clock()
            after = time.monotonic()
        except Exception:  # down, or a thread or test that may not use the database
            self._retry_at = time.monotonic() + RETRY_SECONDS
            log.debug("the database clock could not be read", exc_info=True)
            if not connection.in_atomic_block:  # a broken connection: a new one next time
                connection.close_if_unusable_or_obsolete()
            return
        at = (before + after) / 2
        previous = self._reading
        self._reading = (instant, at)
        self._read_at = after
        if previous is not None:
            moved = (instant - previous[0]).total_seconds() - (at - previous[1])
            if abs(moved) > app_settings.CLOCK_SKEW_WARN_SECONDS:
                log.warning(
                    "the database's clock moved %+.3f s against this host's monotonic clock "
                    "since it was last read: the system follows it",
                    moved,
                )
        if check:
            self.check()

    def skew_seconds(self) -> float | None:
        """How far this host's wall clock is ahead of the database's (negative: behind);
        ``None`` before the first reading."""
        if self._reading is None:
            return None
        return time.time() - self.now().timestamp()

    def check(self) -> float | None:
        """The offset, logged when it goes past the bound, moves by more than the bound, or
        comes back within it."""
        skew = self.skew_seconds()
        if skew is None:
            return None
        bound = app_settings.CLOCK_SKEW_WARN_SECONDS
        if abs(skew) > bound:
            if self._warned is None or abs(skew - self._warned) > bound:
                self._warned = skew
                way = "ahead of" if skew > 0 else "behind"
                log.warning(
                    "this host's clock is %.3f s %s the database's (bound %g s, "
                    "TASKS_CLOCK_SKEW_WARN_SECONDS): the system keeps to the database's clock",
                    abs(skew),
                    way,
                    bound,
                )
        elif self._warned is not None:
            self._warned = None
            log.warning("this host's clock is back within %g s of the database's", bound)
        return skew


_clock = DatabaseClock()


def now() -> datetime:
    """The database's "now" (see the module's docstring)."""
    return _clock.now()


def skew_seconds() -> float | None:
    """This host's wall clock minus the database's, in seconds (logged past the bound)."""
    _clock.now()  # the first reading, if there was none
    return _clock.check()


def read(*, check: bool = True) -> None:
    """Read the database's clock now, instead of at the next renewal (``check=False``: the
    host's offset is not checked, nor logged, until :func:`skew_seconds` or the next
    renewal; for a process whose logging is not configured yet)."""
    _clock.read(check=check)
