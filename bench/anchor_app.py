"""Plain Celery, as a user would run it without this project: the anchors.

``ANCHOR_MODE=classic`` (default settings: prefetch multiplier 4, early ack),
``ANCHOR_MODE=native`` (quorum queue, topic exchange, ``confirm_publish``: Celery's native
delayed delivery keeps far-future messages in RabbitMQ's ``celery_delayed_*`` queues) or
``ANCHOR_MODE=results`` (what a Django shop records runs with today: classic delivery plus
django-celery-results' database backend with ``task_track_started`` and ``result_extended``,
in the project's database through its Django settings).
Each task records ``started - due`` (ms) in Redis, so lateness is measured the same way as
for our runs (at the start of the task).
"""

from __future__ import annotations

import os
import time
from typing import Any

import redis
from celery import Celery
from kombu import Exchange, Queue

MODE = os.environ.get("ANCHOR_MODE", "classic")
QUEUE = os.environ.get("ANCHOR_QUEUE", "bench-anchor")
RESULTS_KEY = os.environ.get("ANCHOR_KEY", "bench:anchor")

# Not the current app: the bench process publishes our runs through the project app.
app = Celery("anchor", broker=os.environ["CELERY_BROKER_URL"], set_as_current=False)
app.conf.update(task_default_queue=QUEUE, worker_hijack_root_logger=False, task_ignore_result=True)
if MODE == "native":
    app.conf.update(
        broker_transport_options={"confirm_publish": True},
        task_default_queue_type="quorum",
        task_default_exchange_type="topic",
        broker_native_delayed_delivery_queue_type="quorum",
        task_queues=[
            Queue(
                QUEUE,
                Exchange(QUEUE, type="topic"),
                routing_key=QUEUE,
                queue_arguments={"x-queue-type": "quorum"},
            )
        ],
    )
if MODE == "results":
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    django.setup()
    app.conf.update(
        result_backend="django-db",
        task_track_started=True,
        result_extended=True,
        task_ignore_result=False,
    )
_redis: redis.Redis | None = None


def store() -> redis.Redis:
    global _redis
    if _redis is None:
        _redis = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/6"))
    return _redis


@app.task(name="bench.anchor")
def anchor(due: float, tag: str = "") -> None:
    started = time.time()
    store().rpush(RESULTS_KEY, f"{(started - due) * 1000:.3f}")


@app.task(name="bench.raw_noop")
def raw_noop() -> None:
    store().rpush(RESULTS_KEY, f"{time.time():.6f}")


_pg = None
FLOOR_ROWS = 200  # table bench_floor, made by bench.execution


@app.task(name="bench.raw_two_writes")
def raw_two_writes(slot: int) -> None:
    """A no-op that durably records its start and its end: two autocommitted one-row
    ``UPDATE`` round trips to Postgres (prepared), nothing else."""
    global _pg
    if _pg is None:
        import psycopg

        _pg = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
    started = time.time()
    two_writes(_pg, slot)
    store().rpush(RESULTS_KEY, f"{started:.6f}")


def two_writes(pg: Any, slot: int) -> None:
    """The floor's record of one task: its start and its end, two one-row ``UPDATE``s on
    ``pg`` (autocommitted, prepared). Also run in one process by ``bench.execution``."""
    pg.execute("UPDATE bench_floor SET started = started + 1 WHERE id = %s", [slot], prepare=True)
    pg.execute("UPDATE bench_floor SET finished = finished + 1 WHERE id = %s", [slot], prepare=True)
