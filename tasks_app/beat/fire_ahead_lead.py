"""How far ahead beat must prepare fires so that each one's message is in the broker by its
instant: pure arithmetic on counts, no database and no clock (``now`` is passed).

Beat records a fire as a run and publishes it at a measured rate (seconds per fire). When
``n`` fires are due by the instant ``t`` (counting every fire due before it, because work is
done in due order), the work on them must start ``n × seconds_per_fire`` before ``t``.
:func:`lead_needed` returns the shortest lead from ``now`` that covers every instant whose
work must start now (within ``margin``: the next pass may come a tick later), never less
than ``floor`` (the release horizon: what beat always does) nor more than ``cap``
(``TASKS_FIRE_AHEAD_SECONDS``). A steady load (10,000 interval schedules spread over 10 s)
needs no more than the floor; 100,000 cron fires on one minute need tens of seconds.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

BUCKET = timedelta(seconds=1)  # counts come per whole second of the due instant


def lead_needed(
    counts: Iterable[tuple[datetime, int]],
    *,
    now: datetime,
    seconds_per_fire: float,
    margin: timedelta,
    floor: timedelta,
    cap: timedelta,
) -> timedelta:
    """The lead to work with, given ``counts``: (start of a second, fires due in that
    second), in time order. A second whose work must start by ``now + margin`` is covered
    whole (its fires are due up to a second after its start)."""
    lead = floor
    due = 0
    for second, fires in counts:
        due += fires
        start_by = second - timedelta(seconds=due * seconds_per_fire)
        if start_by <= now + margin:
            lead = max(lead, second + BUCKET - now)
    return min(lead, cap) if cap > floor else floor


def per_fire(*, seconds: float, fires: int, previous: float, weight: float = 0.5) -> float:
    """A new estimate of seconds per fire from a step that did ``fires`` in ``seconds``,
    blended with ``previous`` (steps of a few fires say little: they keep it)."""
    if fires < 100 or seconds <= 0:
        return previous
    return (1 - weight) * previous + weight * (seconds / fires)


def wall_share(
    *,
    step_seconds: float,
    start_to_start: float,
    fires: int,
    previous: float,
    weight: float = 0.5,
    least: float = 0.1,
) -> float:
    """A new estimate of the share of wall time the preparing steps get: a step that took
    ``step_seconds`` and the next one ``start_to_start`` after it, blended with
    ``previous``, never below ``least`` nor above 1 (steps of a few fires keep it)."""
    if fires < 100 or start_to_start <= 0:
        return previous
    share = min(step_seconds / start_to_start, 1.0)
    return max(least, (1 - weight) * previous + weight * share)
