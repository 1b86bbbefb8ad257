"""Arrivals at a steady rate, each with a seeded delay: the ``enqueue`` scenario's lateness
part makes the same calls on our side and on its anchor's (``bench/anchors/anchor.py``), so
nothing of the project is imported here."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

SEED = 4


def arrive(n: int, *, rate: float, max_delay: float, emit: Callable[[int, float], Any]) -> int:
    """Call ``emit(i, delay_s)`` ``n`` times, the i-th at ``i / rate`` seconds after the
    first, each with a delay of 1 to ``max_delay`` seconds drawn from one seeded generator.
    Returns ``n``."""
    rng, started = random.Random(SEED), time.monotonic()
    for i in range(n):
        if (wait := started + i / rate - time.monotonic()) > 0:
            time.sleep(wait)
        emit(i, rng.uniform(1, max_delay))
    return n
