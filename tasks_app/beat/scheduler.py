"""The beat scheduler class: ``celery -A project beat`` with ``TaskScheduler``.

It keeps django-celery-beat's models and admin (and fires any PeriodicTask that is not owned
by a task the stock way), but owned entries are fired from the tasks table. Every
``TASKS_BEAT_TICK_SECONDS`` the **leader** (``tasks_app.beat.leadership``; standbys only check
whether they can take over)

1. records a run for **every** recurring fire due within the release horizon, in batches of
   1,000 tasks, advancing each task's ``next_run_at`` in the same transaction before anything
   is published (``firing.schedule_fire_due``), and
2. releases every pending run due within the horizon to the broker with an ETA
   (``services.release_due_runs``) — and does only that every
   ``TASKS_RELEASE_INTERVAL_SECONDS`` in between, so released runs reach the workers in
   small batches; and
3. prepares a busy instant ahead (``tasks_app.beat.fire_ahead``): when more fires are due
   soon than it can record and publish within the horizon at its measured rate, it records
   and publishes them earlier (up to ``TASKS_FIRE_AHEAD_SECONDS``), in the release passes.

Both read indexes on the due instant (``task_state_next_run_idx``, ``run_pending_due_idx``),
so a schedule change made through the services is seen on the next tick: no global "changed"
row is read for owned entries and nothing is reloaded. The stock path for non-owned entries
still uses django-celery-beat's ``PeriodicTasks`` row to notice changes, but reads it only
right before it sends a stock entry (so an edit made before the entry's next fire is obeyed,
as with stock ``DatabaseScheduler``) and otherwise every ``TASKS_BEAT_STOCK_CHECK_SECONDS``
(1 s), not on each of beat's wake-ups (every ``TASKS_RELEASE_INTERVAL_SECONDS``): one read by
primary key, whatever the number of schedules; owned entries never depend on it.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVar

from django.db import close_old_connections
from django.db.models import Case, Value, When
from django_celery_beat.models import CrontabSchedule
from django_celery_beat.schedulers import DatabaseScheduler, ModelEntry

from .. import selectors, services
from ..conf import app_settings
from ..observability import health
from ..runtime import clock
from . import alarms, leadership, prune_thread, sweep
from .fire_ahead import FireAhead

log = logging.getLogger(__name__)
T = TypeVar("T")


@contextmanager
def stop_deferred() -> Iterator[None]:
    """SIGTERM and SIGINT wait until the block is done, then reach the handler they would
    have (Celery's: save the schedule, exit). Celery raises ``SystemExit`` wherever beat's
    main thread is: in the middle of a release, after a batch of runs was marked ``queued``
    and committed but before their messages were sent, those runs waited for the sweep
    (``TASKS_REQUEUE_AFTER_SECONDS`` past their due time) — every deploy of beat could
    make up to ``TASKS_RELEASE_BATCH`` runs two minutes late. A stop now waits for the
    pass in progress (well under a second in steady state); a second signal stops it at
    once, as before (a pass stuck on an unreachable database). Only the main thread can
    handle signals: elsewhere (beat embedded in a worker) the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous: dict[int, Any] = {}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    def defer(signum: int, _frame: object) -> None:
        caught.append(signum)
        if len(caught) == 2:
            restore()
            os.kill(os.getpid(), signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        previous[sig] = signal.signal(sig, defer)
    try:
        yield
    finally:
        restore()
        if len(caught) == 1:
            os.kill(os.getpid(), caught[0])


class StockEntry(ModelEntry):
    """A non-owned entry, as django-celery-beat's, whose fire bookkeeping is written without
    rewriting the row. Stock ``ModelEntry.save`` reads the row, sets the fire's fields and
    saves every column: an edit committed between that read and that save (a person
    disabling the entry right after a fire, when beat writes the fire down) was overwritten
    with the values beat had read, and the entry fired again. Here one ``UPDATE`` sets only
    those fields (not marking the schedule changed, as stock's save with ``no_changes``),
    with stock's rule that a disabled entry keeps no ``last_run_at``."""

    def save(self) -> None:
        model = self.model
        type(model)._default_manager.filter(pk=model.pk).update(
            last_run_at=Case(When(enabled=True, then=Value(model.last_run_at)), default=None),
            total_run_count=model.total_run_count,
        )


class TaskScheduler(DatabaseScheduler):
    Entry = StockEntry

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.leadership = leadership.CachedLeadership(
            leadership.leadership_for_database(name=f"{socket.gethostname()} pid {os.getpid()}"),
            interval=app_settings.BEAT_TICK_SECONDS,
        )
        self._was_leader = False
        self.fire_ahead = FireAhead()  # a busy instant prepared ahead (beat.fire_ahead)
        self._next_pass = 0.0
        self._next_release = 0.0
        self._next_change_check = 0.0
        self._first_pass = False
        self._paused_queues: frozenset[str] | None = None  # as last logged
        super().__init__(*args, **kwargs)

    def enabled_models_qs(self) -> Any:
        """The stock path's entries: every enabled entry no task owns. Entries owned by tasks
        are fired from the tasks table (``leader_pass``) and are named
        ``services.OWNED_ENTRY_PREFIX`` + id: excluding that name lets Postgres find the
        others through the partial index ``tasks_app_stock_entry_idx`` without visiting the
        owned ones (reading them all would cost every start-up and reload time in proportion
        to the tasks)."""
        return (
            super()
            .enabled_models_qs()
            .exclude(name__startswith=services.OWNED_ENTRY_PREFIX)
            .filter(owner_task__isnull=True)
        )

    def _get_unique_timezone_names(self) -> Any:
        """The zones of the stored crontabs, each once. django-celery-beat's own query keeps
        ``CrontabSchedule``'s default ordering, so its ``DISTINCT`` returns one row per crontab
        and the hour-window filter of ``enabled_models_qs`` grew a ``CASE`` branch per
        crontab, so with the crontabs of many cron tasks building that query cost beat's
        start-up and every reload (the owned entries are filtered out after it)."""
        return CrontabSchedule.objects.order_by().values_list("timezone", flat=True).distinct()

    def schedule_changed(self) -> bool:
        """The stock change check for non-owned entries (see module doc): read the
        ``PeriodicTasks`` row right before a stock entry is sent — so an edit made before
        an entry's next fire is obeyed, as stock does — and otherwise at most every
        ``TASKS_BEAT_STOCK_CHECK_SECONDS`` (stock reads it on each of its ticks, at most 5 s
        apart)."""
        now = time.monotonic()
        if now < self._next_change_check and not self._stock_entry_due():
            return False
        self._next_change_check = now + app_settings.BEAT_STOCK_CHECK_SECONDS
        return bool(super().schedule_changed())

    def _stock_entry_due(self) -> bool:
        """Whether the stock heap's first entry is due now: ``Scheduler.tick``, which reads
        ``self.schedule`` (and so this check) first, is about to send it."""
        heap = self._heap
        if not heap:
            return False
        when, _, entry = heap[0]
        return bool(when <= self._when(entry, 0))

    def tick(self, *args: Any, **kwargs: Any) -> float:
        tick_seconds = app_settings.BEAT_TICK_SECONDS
        close_old_connections()
        now = clock.now()
        if not self.leadership.is_leader():
            health.record_beat_tick(now)  # /api/health reports the age of the last tick
            if self._was_leader:
                log.warning("beat is no longer the leader; standing by")
                self._was_leader = False
            return tick_seconds
        if not self._was_leader:
            self._was_leader = True
            self._on_promotion()
        mono = time.monotonic()
        with stop_deferred():
            if mono >= self._next_pass:
                self._next_pass = mono + tick_seconds
                self._next_release = mono + app_settings.RELEASE_INTERVAL_SECONDS
                health.record_beat_tick(now)
                self.leader_pass(now)
            elif mono >= self._next_release:
                self._next_release = mono + app_settings.RELEASE_INTERVAL_SECONDS
                self.release_pass(now)
        stock_wait = super().tick(*args, **kwargs)
        wake = min(self._next_pass, self._next_release)
        return max(min(stock_wait, wake - time.monotonic()), 0.0)

    def leader_pass(self, now: datetime) -> None:
        """Everything only the leader does, once per tick."""
        started = time.perf_counter()
        sweep.recover_runs(now=now)  # expired, stalled, lost runs; never raises
        # Each step on its own: one failing (a database blip) must neither kill beat nor
        # hold back the others; the next tick retries it. (One bad task cannot make a step
        # fail: firing isolates it, see beat.firing.)
        fired = self._step("firing", self.fire_ahead.fire_due, now=now) or []
        released = self._step("release", services.release_due_runs, now=now, wait=False) or 0
        # Runs held by flow control whose slot or reserved start came (their worker lets
        # most go as a run ends; this catches a worker killed, a limit raised).
        released += self._step("flow control", services.flow_admit, now=now) or 0
        self._step("planning ahead", self.fire_ahead.plan, now=now)
        self._step("alarms", alarms.alarms_check, now=now)
        self._step("paused queues", self._log_paused_queues)
        # Further leader-only upkeep (bounded batches that never block a tick) goes here.
        prune_thread.keep_pruning()  # old runs deleted from a thread of its own while leading
        health.beat_tick_record(duration_seconds=time.perf_counter() - started)
        if self._first_pass:
            # Start-up (or take-over) done: this beat now fires the schedules.
            self._first_pass = False
            log.info(
                "beat leading: first pass done (fired=%d released=%d tick_ms=%.1f)",
                len(fired),
                released,
                (time.perf_counter() - started) * 1000,
            )
        elif fired or released:
            log.log(
                logging.INFO if app_settings.BEAT_LOG_TICKS else logging.DEBUG,
                "beat tick: fired=%d released=%d tick_ms=%.1f",
                len(fired),
                released,
                (time.perf_counter() - started) * 1000,
            )

    def _log_paused_queues(self) -> None:
        """One line when the set of paused queues changes (read each leader pass: one tiny
        query), so beat's log says when runs of a queue started waiting and when they went
        on. The first pass logs the queues already paused."""
        paused = frozenset(selectors.paused_queues())
        if paused == self._paused_queues:
            return
        if paused or self._paused_queues is not None:
            log.warning(
                "paused queues: %s (their runs wait until resumed)",
                ", ".join(sorted(paused)) or "none",
            )
        self._paused_queues = paused

    @staticmethod
    def _step(name: str, step: Callable[..., T], **kwargs: Any) -> T | None:
        try:
            return step(**kwargs)
        except Exception:
            log.exception("beat %s failed; retrying next tick", name)
            close_old_connections()
            return None

    def release_pass(self, now: datetime) -> None:
        """Between leader passes, only the release: runs reach the workers in small, even
        batches: a pass a second would hand each worker a second's ETA messages at once, and
        its main process would be busy with them while earlier runs come due."""
        try:
            services.release_due_runs(now=now, wait=False)
            self.fire_ahead.prepare(now=now, budget=app_settings.RELEASE_INTERVAL_SECONDS)
        except Exception:  # as in leader_pass: the next pass retries
            log.exception("beat release failed; retrying next pass")
            close_old_connections()

    def _on_promotion(self) -> None:
        # The stock entries' last_run_at may have moved while this replica stood by: read
        # them again instead of firing from a stale heap.
        self._schedule = self.all_as_schedule()
        self._heap = None
        self._next_pass = 0.0
        self._first_pass = True

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.leadership.release()
