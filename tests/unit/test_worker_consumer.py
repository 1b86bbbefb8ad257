"""The worker's consumer frees a request with an ETA by reference counting once its timer
entry has fired (tasks_app/worker/consumer.py): with Celery's own, the request and its entry refer to
each other and wait for a full garbage collection, which paused the worker's main process
for 20-60 ms every ~12 s at 200 runs/s."""

from __future__ import annotations

import gc
import json
import weakref
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from celery.utils.imports import symbol_by_name
from celery.worker import state
from celery.worker.consumer import Consumer as CeleryConsumer
from celery.worker.request import Request
from kombu import Message
from kombu.asynchronous.timer import Timer
from kombu.common import QoS

from project.celery import app
from tasks_app.worker import celery_tasks  # noqa: F401  (registers tasks_app.execute_run)


@pytest.fixture
def no_cycle_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        state.reserved_requests.clear()


def fire_an_eta_request(consumer_class: type) -> weakref.ref[Request]:
    """A real ETA request on a real timer, fired the way the worker's strategy schedules it;
    returns a weak reference to the request once every other reference is gone."""
    consumer = object.__new__(consumer_class)  # only what apply_eta_task touches
    handed: list[Request] = []
    consumer.on_task_request = handed.append
    consumer.qos = QoS(lambda prefetch_count: None, 1)
    message = app.amqp.as_task_v2(
        "6f1c6a52-2a5e-4c1e-9a43-000000000001",
        "tasks_app.execute_run",
        args=["6f1c6a52-2a5e-4c1e-9a43-000000000001"],
        eta=datetime.now(UTC) + timedelta(seconds=1),
    )
    request = Request(
        Message(
            body=json.dumps(message.body),
            headers=message.headers,
            content_type="application/json",
            content_encoding="utf-8",
        ),
        app=app,
        task=app.tasks["tasks_app.execute_run"],
    )
    timer = Timer()
    request._eta_timer_entry = timer.call_at(datetime.now(UTC), consumer.apply_eta_task, (request,))
    for _delay, entry in timer:
        if entry is None:
            break
        entry()
    assert handed == [request]
    state.task_ready(request)  # the run finished
    ref = weakref.ref(request)
    del request, handed, entry, consumer
    return ref


def test_the_configured_consumer_frees_a_fired_eta_request(no_cycle_collector: None) -> None:
    consumer_class = symbol_by_name(app.conf.worker_consumer)
    assert fire_an_eta_request(consumer_class)() is None


def test_celerys_own_consumer_leaves_it_to_the_cycle_collector(no_cycle_collector: None) -> None:
    # What the configured one fixes; if Celery breaks the cycle itself one day, this fails
    # and tasks_app/worker/consumer.py can go.
    assert fire_an_eta_request(CeleryConsumer)() is not None
