"""Classic against quorum queues on the same RabbitMQ, the same run: what ``TASKS_QUEUE_TYPE``
changes in the broker (docs/operations.md#quorum-queues).

``run(results_dir)`` publishes ``MESSAGES`` run messages (the product's own Celery message for
``tasks_app.execute_run``: headers, JSON body, persistent) into a classic queue declared as
the product declares it (``x-max-priority`` 10) and into a quorum queue (``x-queue-type``
quorum, ``x-delivery-limit`` 20), each message confirmed by the broker before the next
(Celery's ``confirm_publish``), then reads each queue's memory with ``rabbitmqctl
list_queues`` once all messages are in. Reports the publish rate and the memory (total and
per message) of each, and the quorum / classic ratios. Both queues are deleted afterwards.

Standalone: ``python -m bench queue_memory`` (the broker from ``CELERY_BROKER_URL``).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

MESSAGES = int(os.environ.get("BENCH_QUEUE_MEMORY_MESSAGES", "20000"))
CLASSIC = {"x-max-priority": 10}
QUORUM = {"x-queue-type": "quorum", "x-delivery-limit": 20}


def run(results_dir: Path) -> dict[str, Any]:
    from celery import Celery
    from kombu import Connection, Exchange, Producer, Queue

    url = os.environ.get("CELERY_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")
    vhost = unquote(urlparse(url).path[1:]) or "/"
    app = Celery("bench-queue-memory", broker=url, set_as_current=False)
    tag = uuid.uuid4().hex[:8]
    result: dict[str, Any] = {"messages": MESSAGES, "vhost": vhost}
    with Connection(url, transport_options={"confirm_publish": True}) as conn:
        for kind, arguments in (("classic", CLASSIC), ("quorum", QUORUM)):
            name = f"bench-queue-memory-{kind}-{tag}"
            queue = Queue(name, Exchange(""), routing_key=name, queue_arguments=arguments)
            queue(conn.default_channel).declare()
            producer = Producer(conn.default_channel)
            try:
                started = time.perf_counter()
                for _ in range(MESSAGES):
                    run_id = str(uuid.uuid4())
                    message = app.amqp.as_task_v2(
                        run_id,
                        "tasks_app.execute_run",
                        args=[run_id],
                        time_limit=3605,
                        soft_time_limit=3600,
                    )
                    producer.publish(
                        message.body,
                        routing_key=name,
                        headers=message.headers,
                        serializer="json",
                        delivery_mode=2,
                        priority=5,
                        **message.properties,
                    )
                seconds = time.perf_counter() - started
                memory = _queue_memory(vhost, name, MESSAGES)
                result[kind] = {
                    "publish_per_s": round(MESSAGES / seconds, 1),
                    "memory_bytes": memory,
                    "memory_bytes_per_message": round(memory / MESSAGES, 1),
                }
            finally:
                conn.default_channel.queue_delete(name)
    for key in ("publish_per_s", "memory_bytes"):
        result[f"ratio_quorum_to_classic_{key}"] = round(
            result["quorum"][key] / result["classic"][key], 3
        )
    (Path(results_dir) / "queue_memory.json").write_text(json.dumps(result, indent=2))
    return result


def _queue_memory(vhost: str, name: str, messages: int, timeout: float = 120) -> int:
    """The queue's memory once it holds ``messages``: median of three readings."""
    rabbitmqctl = shutil.which("rabbitmqctl") or "rabbitmqctl"
    readings: list[int] = []
    deadline = time.monotonic() + timeout
    while len(readings) < 3 and time.monotonic() < deadline:
        out = subprocess.run(  # noqa: S603 - fixed argv, no shell
            [rabbitmqctl, "-q", "list_queues", "-p", vhost, "name", "messages", "memory"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for line in out.splitlines():
            fields = line.split("\t")
            if fields[0] == name and int(fields[1]) == messages:
                readings.append(int(fields[2]))
        time.sleep(1)
    if not readings:
        raise RuntimeError(f"queue {name} never reported {messages} messages")
    return int(statistics.median(readings))
