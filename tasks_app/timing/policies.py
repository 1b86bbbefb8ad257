"""Pure schedule policies: which fire instants to record now, and what comes next.

Given a task's schedule and policy fields (no ORM, no clock reads), ``plan_fires`` decides

* **catch-up** after downtime (beat stopped, task paused, deploy): fires older than the
  misfire ``grace`` were *missed*; ``skip`` records none of them, ``latest`` one (the most
  recent), ``all`` every one within ``catchup_window`` — each keeps the instant it stood for;
* **bounds**: nothing before ``start_at`` or after ``end_at``; at most ``max_runs`` fires in
  the task's life (then the schedule is finished);
* **jitter**: a run's due time is its instant plus a per-fire offset derived from a hash of
  (task, instant), so a restart or a second beat computes the same offset.

and **retries**: when a failed attempt is tried again (``retry_after``).

Overlap (``skip``/``buffer_one``) is decided when a run is claimed, not here: only then is it
known whether the previous run is still going (the store's ``overlap_verdict``).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from .scheduling import Schedule

MAX_FIRES_PER_PLAN = 1000
MAX_RETRY_DELAY_SECONDS = 3600
_TINY = timedelta(microseconds=1)


@dataclass(frozen=True)
class Policy:
    catchup: str = "skip"  # skip | latest | all
    catchup_window: timedelta = timedelta(hours=1)
    grace: timedelta = timedelta(seconds=5)
    start_at: datetime | None = None
    end_at: datetime | None = None
    max_runs: int | None = None
    fire_count: int = 0


@dataclass(frozen=True)
class Plan:
    fires: tuple[datetime, ...]  # instants to record now, oldest first
    missed: int  # missed instants the catch-up policy did not replay
    next_fire: datetime | None  # the task's next_run_at after this plan
    finished: bool  # the schedule will never fire again (end_at passed, max_runs reached)


def fires_left(policy: Policy) -> int | None:
    """How many more fires the schedule may record in the task's life (``None``: no
    ``max_runs``)."""
    return None if policy.max_runs is None else max(policy.max_runs - policy.fire_count, 0)


def past_end(fire: datetime, policy: Policy) -> bool:
    """Whether ``fire`` is after the schedule's ``end_at``."""
    return policy.end_at is not None and fire > policy.end_at


def fire_within_bounds(fire: datetime | None, policy: Policy) -> datetime | None:
    """``fire`` if the schedule still fires then; ``None`` once it has ended (``max_runs``
    fires recorded, or ``fire`` past ``end_at``).

    This module is the one home of a schedule's end: beat's plan (:func:`plan_fires`) and
    the fire planned when a schedule is saved (``tasks_app_planned_fire`` in
    tasks_app/store/schema.sql stores the fire given here, deciding nothing) both ask it.
    """
    if fire is None or past_end(fire, policy) or fires_left(policy) == 0:
        return None
    return fire


def jitter_offset(task_id: str, instant: datetime, jitter_seconds: int) -> timedelta:
    """A stable offset in ``[0, jitter_seconds)`` for this task's fire at ``instant``."""
    if jitter_seconds <= 0:
        return timedelta(0)
    digest = hashlib.sha256(f"{task_id}|{instant.isoformat()}".encode()).digest()
    fraction = int.from_bytes(digest[:8], "big") / 2**64
    return timedelta(milliseconds=round(fraction * jitter_seconds * 1000))


def plan_fires(
    schedule: Schedule,
    *,
    next_fire: datetime,
    now: datetime,
    lookahead: timedelta,
    policy: Policy,
) -> Plan:
    """Decide the fires to record for a task whose next planned fire is ``next_fire``.

    Fires up to ``now + lookahead`` are due (recorded ahead so they can be published with an
    exact ETA); those before ``now - grace`` were missed and go through the catch-up policy.
    """
    fire: datetime | None = next_fire
    if policy.start_at and next_fire < policy.start_at:
        fire = schedule.next_fire(policy.start_at - _TINY)
    missed: list[datetime] = []
    skipped_unseen = 0
    window_start = now - policy.catchup_window
    if fire is not None and fire < window_start:
        # Long downtime: don't walk every missed instant, jump to the catch-up window.
        skipped_unseen = 1
        oldest = fire
        fire = schedule.next_fire(window_start - _TINY)
        if policy.catchup == "latest" and (fire is None or fire >= now - policy.grace):
            missed.append(oldest)  # nothing inside the window: the oldest stands in
    due: list[datetime] = []
    while (
        fire is not None and fire <= now + lookahead and len(due) + len(missed) < MAX_FIRES_PER_PLAN
    ):
        if past_end(fire, policy):
            fire = None
            break
        (missed if fire < now - policy.grace else due).append(fire)
        fire = schedule.next_fire(fire)
    if fire is not None and past_end(fire, policy):
        fire = None

    if policy.catchup == "all":
        kept = missed
    elif policy.catchup == "latest":
        kept = missed[-1:]
    else:
        kept = []
    fires = kept + due
    finished = fire is None
    remaining = fires_left(policy)
    if remaining is not None:
        if len(fires) >= remaining:
            fires, fire, finished = fires[:remaining], None, True
    return Plan(
        fires=tuple(fires),
        missed=len(missed) - len(kept) + skipped_unseen,
        next_fire=fire,
        finished=finished,
    )


def retry_after(
    *, attempt: int, interruptions: int, max_retries: int, backoff_seconds: int
) -> timedelta | None:
    """When a failed attempt is tried again, ``None`` when no retry is left: attempt ``n`` is
    retried while ``n - interruptions <= max_retries`` (attempts cut off by their worker's
    death do not count), after an exponential backoff from ``backoff_seconds`` (doubling per
    counted attempt, capped at ``MAX_RETRY_DELAY_SECONDS``) with full jitter on its upper
    half, so retries of many runs that failed together do not align."""
    tries = attempt - interruptions
    if tries > max_retries:
        return None
    capped = min(backoff_seconds * (2 ** (tries - 1)), MAX_RETRY_DELAY_SECONDS)
    return timedelta(seconds=capped / 2 + random.uniform(0, capped / 2))  # noqa: S311
