"""The batch publisher (beat's fires, the release) writes each run's message itself, with
Celery's message builders, instead of calling ``send_task`` per message: the message a
worker receives must be the very one ``send_task`` writes, on the real broker."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from celery import current_app
from django.utils import timezone

from tasks_app import dispatch
from tasks_app.models import Run, Task

QUEUE = "test-dispatch-compare"


@pytest.fixture
def channel() -> Iterator[Any]:
    with current_app.connection_for_write() as conn:
        channel = conn.default_channel
        yield channel
        channel.queue_delete(QUEUE)


@pytest.mark.parametrize("due_in", [timedelta(0), timedelta(seconds=3)], ids=["now", "eta"])
def test_a_batch_writes_the_message_send_task_writes(channel: Any, due_in: timedelta) -> None:
    now = timezone.now()
    task = Task(id="compare", action="noop", queue=QUEUE, priority=3, timeout_seconds=60)
    run = Run(task=task, due_at=now + due_in, scheduled_for=now + due_in, attempt=2)
    producer = current_app.amqp.Producer(channel)

    current_app.send_task(
        dispatch.EXECUTE_RUN, producer=producer, **dispatch.message_options(run, now=now)
    )
    assert dispatch.BatchPublisher(current_app).publish([run], now=now) == []

    by_send_task, by_batch = (channel.basic_get(QUEUE, no_ack=True) for _ in range(2))
    assert by_batch is not None and by_send_task is not None
    assert by_batch.body == by_send_task.body
    assert by_batch.properties == by_send_task.properties  # headers: eta, time limits, ...
    assert by_batch.properties["application_headers"]["id"] == str(run.id)
    assert (by_batch.delivery_info["exchange"], by_batch.delivery_info["routing_key"]) == (
        by_send_task.delivery_info["exchange"],
        by_send_task.delivery_info["routing_key"],
    )
