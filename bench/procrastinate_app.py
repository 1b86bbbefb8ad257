"""Procrastinate, the Postgres task queue that records every job's lifecycle (fetch locks the
job and marks it ``doing``, finish marks it ``succeeded``): the execution anchor
``procrastinate`` of scenario 3.

Imported only by ``procrastinate worker`` and the deferring script, inside the bench's own
virtualenv for it (``var/bench-venvs/procrastinate``, made by ``bench.execution`` from pinned
versions), never by the project. Each job records its start in Redis, as the Celery anchors do.
"""

from __future__ import annotations

import os
import time

import procrastinate
import redis

app = procrastinate.App(
    connector=procrastinate.PsycopgConnector(conninfo=os.environ["PROCRASTINATE_DATABASE_URL"])
)
_redis = redis.Redis.from_url(os.environ["REDIS_URL"])
RESULTS_KEY = os.environ.get("ANCHOR_KEY", "bench:procrastinate")


@app.task(name="bench.procrastinate_noop", queue="bench")
async def noop() -> None:
    _redis.rpush(RESULTS_KEY, f"{time.time():.6f}")
