"""Preparing a busy instant ahead: the leading beat's part beyond the release horizon.

At a steady load beat records each recurring fire and publishes it within the release
horizon (``TASKS_RELEASE_HORIZON_SECONDS``, 5 s). When many fires share one instant (100,000
cron schedules on the same minute) that is not enough time: beat records and publishes a
few thousand fires a second. So on every leader pass :class:`FireAhead` reads how many fires
are due in the next ``TASKS_FIRE_AHEAD_SECONDS`` (per second: fires not recorded yet, and
fires recorded but not published) and, from the rates it measured on its own work
(``beat.fire_ahead_lead``), how far ahead it has to start so that every message is in the
broker by its instant. Between passes, :meth:`FireAhead.prepare` records those fires as
``pending`` runs (``firing.schedule_fire_due`` with that lookahead) and publishes them
(``release_fires_ahead``, exact ETAs), earliest first, each step bounded in time so
that the short-horizon releases keep going.

The promises hold for a fire prepared ahead: a pause, an edit of what a fire is or a delete
made before its instant removes it (``services`` drop fires recorded ahead; a message
already sent finds no run, or a paused task, and does nothing), and a fire is still recorded
once (``UNIQUE (task, scheduled_for)``). Delayed and at-time runs never go out early.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from .. import selectors, services, store
from ..conf import app_settings
from ..models import Run
from ..services.run_release import send_queued
from . import firing
from .fire_ahead_lead import lead_needed, per_fire, wall_share

log = logging.getLogger(__name__)

SAFETY = 1.5  # measured rates are taken as 2/3 of what they were (a shared, noisy machine)
# Before anything is measured (seconds per fire): below the rates of 2 shared cores. The
# publishing rate is of publishing ahead alone, in bulk: a full 100,000-fire burst went out
# at 1,950-2,400 messages/s while the short-horizon releases' small batches measured 4,100/s
# (starting from those, its publishing began 41-45 s before the minute and ended 3.3-6.8 s
# after it).
START_RECORD_PER_FIRE = 0.0003
START_PUBLISH_PER_FIRE = 0.001
# The share of wall time the preparation gets (its steps run between the leader passes and
# the short-horizon releases) before it is measured.
START_SHARE = 0.5


class FireAhead:
    """The leads and the rates behind them, kept by the leading beat between passes. The
    recording rate is measured on every firing step beat takes (``fire_due``, ``prepare``),
    the publishing rate on the publishing ahead (``prepare``)."""

    def __init__(self) -> None:
        self.record_per_fire = START_RECORD_PER_FIRE
        self.publish_per_fire = START_PUBLISH_PER_FIRE
        # The rates are of the steps alone; the work goes at ``share`` of them, the share of
        # wall time the steps get, measured from one preparing step to the next (76-94 %
        # while a 100,000-fire burst was prepared).
        self.share = START_SHARE
        self._last_step: tuple[float, float, int] | None = None  # (start, seconds, fires)
        self.record_lead = self.release_lead = timedelta(0)
        self.record_until = self.release_until = datetime.min.replace(tzinfo=UTC)

    def fire_due(self, *, now: datetime) -> list[Run]:
        """The leader pass's firing: every fire due within the release horizon."""
        return self._record(now=now, lookahead=services.horizon(), deadline=None)

    def plan(self, *, now: datetime) -> None:
        """Read the fires due soon and decide both leads (on each leader pass)."""
        horizon = services.horizon()
        cap = timedelta(seconds=app_settings.FIRE_AHEAD_SECONDS)
        if cap <= horizon:
            self.record_lead = self.release_lead = timedelta(0)
            return
        margin = timedelta(seconds=app_settings.BEAT_TICK_SECONDS + 1.0)
        unrecorded = selectors.fires_due_per_second(until=now + cap)
        pending = selectors.pending_fires_per_second(until=now + cap)
        release_lead = lead_needed(
            _merged(pending, unrecorded),
            now=now,
            seconds_per_fire=SAFETY * self.publish_per_fire / self.share,
            margin=margin,
            floor=horizon,
            cap=cap,
        )
        record_lead = lead_needed(
            unrecorded,
            now=now,
            seconds_per_fire=SAFETY * (self.record_per_fire + self.publish_per_fire) / self.share,
            margin=margin,
            floor=horizon,
            cap=cap,
        )
        # Once an instant is being prepared it stays covered until it has passed: the lead
        # needed shrinks as the work gets done, and stopping half-way would start over.
        self.record_until = max(self.record_until, now + record_lead)
        self.release_until = max(self.release_until, now + release_lead)
        self.record_lead = max(min(self.record_until - now, cap), horizon)
        self.release_lead = max(min(self.release_until - now, cap), horizon)
        if self.record_lead > horizon or self.release_lead > horizon:
            log.info(
                "preparing fires ahead: recording %.1f s, publishing %.1f s ahead "
                "(measured %.0f fires/s recorded, %.0f/s published, in %.0f %% of the time)",
                self.record_lead.total_seconds(),
                self.release_lead.total_seconds(),
                1 / self.record_per_fire,
                1 / self.publish_per_fire,
                100 * self.share,
            )

    def prepare(self, *, now: datetime, budget: float) -> None:
        """Record, then publish, fires within the leads beyond the horizon, for about
        ``budget`` seconds (at least one batch of each)."""
        horizon = services.horizon()
        if self.record_lead <= horizon and self.release_lead <= horizon:
            self._last_step = None  # nothing to prepare: the next step starts a new series
            return
        began = time.monotonic()
        deadline = began + budget
        done = 0
        if self.record_lead > horizon:
            done += len(self._record(now=now, lookahead=self.record_lead, deadline=deadline))
        if self.release_lead > horizon:
            started = time.perf_counter()
            sent = release_fires_ahead(now=now, until=now + self.release_lead, deadline=deadline)
            self.publish_per_fire = per_fire(
                seconds=time.perf_counter() - started, fires=sent, previous=self.publish_per_fire
            )
            done += sent
        self._measure_share(began, time.monotonic() - began, done)

    def _measure_share(self, began: float, seconds: float, done: int) -> None:
        """Blend in the share of wall time the previous step had, now that this one, which
        follows it, has begun."""
        if self._last_step is not None:
            started, took, fires = self._last_step
            self.share = wall_share(
                step_seconds=took, start_to_start=began - started, fires=fires, previous=self.share
            )
        self._last_step = (began, seconds, done) if done else None

    def _record(self, *, now: datetime, lookahead: timedelta, deadline: float | None) -> list[Run]:
        started = time.perf_counter()
        fired = firing.schedule_fire_due(now=now, lookahead=lookahead, deadline=deadline)
        self.record_per_fire = per_fire(
            seconds=time.perf_counter() - started, fires=len(fired), previous=self.record_per_fire
        )
        return fired


def _merged(*series: Sequence[tuple[datetime, int]]) -> list[tuple[datetime, int]]:
    """Per-second counts added together, in time order."""
    total: dict[datetime, int] = {}
    for counts in series:
        for second, fires in counts:
            total[second] = total.get(second, 0) + fires
    return sorted(total.items())


def release_fires_ahead(*, now: datetime, until: datetime, deadline: float | None = None) -> int:
    """Publish pending **schedule fires** due by ``until`` (beyond the horizon: beat prepares a
    busy instant, ``TASKS_FIRE_AHEAD_SECONDS``), earliest first, each with its exact ETA, in
    batches of ``TASKS_RELEASE_BATCH``; stops after the batch that passes ``deadline``
    (``time.monotonic()``) so the caller's other work goes on. Returns how many went out.

    Only recurring fires go out early: a delayed or at-time run still waits in the database
    until it is within the horizon. A fire published early still obeys a later pause (the
    claim declines it), edit or delete (its run is removed, the message finds none)."""
    limit = app_settings.RELEASE_BATCH
    total = 0
    while True:
        runs = store.release_due_runs(until=until, now=now, limit=limit, fires_only=True)
        total += send_queued(runs, now=now)
        if len(runs) < limit or (deadline is not None and time.monotonic() >= deadline):
            return total
