"""Scenario 2's stock side: the project's Celery app (the same settings, so stock
django-celery-beat gets what a user of this project would get) plus one no-op task that
records when it started, for the start lateness of stock ``DatabaseScheduler`` entries.

``celery -A bench.stock_app worker -Q bench-stock``; entries name ``bench.stamp`` with
their index as the only argument.
"""

from __future__ import annotations

import os
import time

import redis

from project.celery import app

_redis: redis.Redis | None = None


@app.task(name="bench.stamp")
def stamp(index: int) -> None:
    started = time.time()
    global _redis
    if _redis is None:
        _redis = redis.Redis.from_url(os.environ["REDIS_URL"])
    _redis.rpush(os.environ.get("BENCH_START_KEY", "bench:stock-start"), f"{index} {started:.6f}")


__all__ = ["app"]
