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

from tasks_app.messaging import dispatch
from tasks_app.messaging.queues import lane
from tasks_app.models import Run, Task

QUEUE = "test-dispatch-compare"


@pytest.fixture
def channel() -> Iterator[Any]:
    with current_app.connection_for_write() as conn:
        channel = conn.default_channel
        yield channel
        channel.queue_delete(QUEUE)
        channel.queue_delete(lane(QUEUE))


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

    # A run due later than it was made goes to its queue's due lane.
    queue = lane(QUEUE) if due_in else QUEUE
    assert dispatch.target(run) == queue
    by_send_task, by_batch = (channel.basic_get(queue, no_ack=True) for _ in range(2))
    assert by_batch is not None and by_send_task is not None
    assert by_batch.body == by_send_task.body
    assert by_batch.properties == by_send_task.properties  # headers: eta, time limits, ...
    assert by_batch.properties["application_headers"]["id"] == str(run.id)
    assert (by_batch.delivery_info["exchange"], by_batch.delivery_info["routing_key"]) == (
        by_send_task.delivery_info["exchange"],
        by_send_task.delivery_info["routing_key"],
    )


def test_every_message_of_a_batch_is_the_one_send_task_writes_for_its_run(channel: Any) -> None:
    """A batch of one shape (an ``enqueue_many``) is written as copies of its first message
    with each run's id in place: each copy must still be exactly its own run's message."""
    now = timezone.now()
    task = Task(id="compare", action="noop", queue=QUEUE, priority=3, timeout_seconds=60)
    later = now + timedelta(seconds=3)
    runs = [Run(task=task, due_at=now, scheduled_for=now) for _ in range(600)]
    runs += [Run(task=task, due_at=later, scheduled_for=later) for _ in range(3)]
    runs += [Run(task=task, due_at=now, scheduled_for=now, priority=7) for _ in range(3)]
    producer = current_app.amqp.Producer(channel)
    for run in runs:
        current_app.send_task(
            dispatch.EXECUTE_RUN, producer=producer, **dispatch.message_options(run, now=now)
        )
    assert dispatch.BatchPublisher(current_app).publish(runs, now=now) == []

    received: dict[str, list[Any]] = {}
    for queue in (QUEUE, lane(QUEUE)):  # the runs due later: in the due lane
        while (message := channel.basic_get(queue, no_ack=True)) is not None:
            headers = message.properties["application_headers"]
            received.setdefault(headers["id"], []).append(message)
    assert set(received) == {str(run.id) for run in runs}
    for run_id, (by_send_task, by_batch) in received.items():
        assert by_batch.body == by_send_task.body, run_id
        assert by_batch.properties == by_send_task.properties, run_id
        assert by_batch.properties["correlation_id"] == run_id
