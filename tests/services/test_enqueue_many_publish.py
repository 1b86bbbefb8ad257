"""``enqueue_many`` outside a transaction: the batch is committed by its statement and
published in a thread of its own while the caller's thread builds the results and sends
Django's signals; the call returns once both are done (real database and broker)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from celery import current_app

from tasks_app.django_tasks import enqueue_many, task_enqueued
from tasks_app.django_tasks.framework import function_task_id
from tasks_app.models import Run, RunStatus, Task
from tests.django_tasks import functions

pytestmark = pytest.mark.django_db(transaction=True)

QUEUE = "test-enqueue-many-publish"


def route(queue: str) -> str:
    """The function's task, made by a first call, sent to ``queue`` (as an operator sets it)."""
    enqueue_many(functions.add, [((0, 0), {})])
    task_id = function_task_id(functions.add.module_path)
    Task.objects.filter(pk=task_id).update(queue=queue)
    return task_id


@pytest.fixture
def messages() -> Iterator[Any]:
    with current_app.connection_for_write() as conn:
        channel = conn.default_channel
        yield lambda: channel.queue_declare(QUEUE, passive=True).message_count
        channel.queue_delete(QUEUE)


def test_every_message_is_confirmed_and_every_signal_sent_in_the_callers_thread(
    messages: Any,
) -> None:
    task_id = route(QUEUE)
    seen: list[tuple[str, int]] = []

    def receiver(sender: Any, task_result: Any, **kwargs: Any) -> None:
        seen.append((task_result.id, threading.get_ident()))

    task_enqueued.connect(receiver)
    try:
        results = enqueue_many(functions.add, [((i, 1), {}) for i in range(700)])
    finally:
        task_enqueued.disconnect(receiver)

    assert messages() == 700  # all in the queue, confirmed, when the call returned
    assert seen == [(r.id, threading.get_ident()) for r in results]  # in order, in this thread
    queued = Run.objects.filter(task_id=task_id, pk__in=[r.id for r in results])
    assert queued.filter(status=RunStatus.QUEUED).count() == 700


def test_a_batch_the_broker_refuses_fails_with_its_reason_before_the_call_returns() -> None:
    # RabbitMQ refuses queue names with the reserved prefix "amq." (403 ACCESS_REFUSED).
    route("amq.refused")
    results = enqueue_many(functions.add, [((i, 1), {}) for i in range(3)])

    runs = Run.objects.filter(pk__in=[r.id for r in results])
    assert [run.status for run in runs] == [RunStatus.FAILED] * 3
    assert all("ACCESS_REFUSED" in run.error for run in runs)
