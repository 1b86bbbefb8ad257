"""End to end with ``TASKS_QUEUE_TYPE=quorum``: real worker, beat and publisher processes on a
RabbitMQ quorum queue (tasks_app/messaging/queues.py, docs/operations.md#quorum-queues).

The test process itself runs with the session's classic settings, so every message here is
published by a process started in quorum mode: beat (recurring fires, delayed runs it
releases) and a ``manage.py shell`` (delayed runs published at once, one under a second).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from amqp.exceptions import PreconditionFailed
from django.conf import settings
from kombu import Connection, Exchange, Queue

from tasks_app import services
from tasks_app.messaging.queues import quorum_arguments
from tasks_app.models import Run, RunStatus
from tests.processes import ROOT, process_env, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

DELAYED_LEVELS = 28  # Celery's native delayed delivery: celery_delayed_0 .. celery_delayed_27


def broker() -> Connection:
    return Connection(settings.CELERY_BROKER_URL)


def declare(name: str, arguments: dict[str, object], exchange_type: str = "topic") -> None:
    with broker() as conn:
        Queue(name, Exchange(name, exchange_type), name, queue_arguments=arguments)(
            conn.default_channel
        ).declare()


def delete(conn: Connection, *, queue: str | None = None, exchange: str | None = None) -> None:
    try:
        channel = conn.channel()
        if queue:
            channel.queue_delete(queue)
        if exchange:
            channel.exchange_delete(exchange)
    except Exception:  # never declared
        pass


@pytest.fixture
def quorum_queue(_session_queue: str) -> Iterator[str]:
    """A queue of this session for quorum-mode processes; it, its exchange and the delayed
    delivery exchanges and queues those processes declared are deleted afterwards."""
    name = f"{_session_queue}-quorum"
    yield name
    with broker() as conn:
        delete(conn, queue=name, exchange=name)
        delete(conn, exchange="celery_delayed_delivery")
        for level in range(DELAYED_LEVELS):
            delete(conn, queue=f"celery_delayed_{level}", exchange=f"celery_delayed_{level}")


def started_on_time(run: Run) -> bool:
    return run.started_at is not None and 0 <= (run.started_at - run.due_at).total_seconds() < 1


def test_delayed_and_recurring_runs_start_on_time_on_a_quorum_queue(
    quorum_queue: str, worker_factory, beat_factory
) -> None:
    env = {"TASKS_QUEUE_TYPE": "quorum", "TASKS_DEFAULT_QUEUE": quorum_queue}
    worker_factory(**env)
    beat_factory(**env)
    every = services.task_create(
        id="quorum-every-2s",
        action="noop",
        queue=quorum_queue,
        schedule_type="interval",
        interval_seconds=2,
    )
    once = services.task_create(id="quorum-once", action="noop", queue=quorum_queue)
    # Due beyond the release horizon: stored pending, released by beat ~5 s ahead.
    released = services.task_schedule_once(task=once, delay_seconds=8)
    # Published at once by a quorum-mode process: through RabbitMQ's delayed queues (2.5 s)
    # and straight into the queue (0.5 s, under native delayed delivery's one second).
    subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", PUBLISH_SHORT_DELAYS],
        cwd=ROOT,
        env=process_env(**env),
        check=True,
        timeout=60,
    )
    delayed = Run.objects.filter(task=once)
    fires = Run.objects.filter(task=every, status=RunStatus.COMPLETED)
    wait_until(
        lambda: delayed.filter(status=RunStatus.COMPLETED).count() == 3 and fires.count() >= 3,
        timeout=60,
        message="three delayed runs and three fires to complete",
    )

    runs = sorted(delayed, key=lambda r: r.due_at - r.created_at)
    assert [round((r.due_at - r.created_at).total_seconds(), 1) for r in runs] == [0.5, 2.5, 8.0]
    assert released.id == runs[-1].id
    assert all(started_on_time(r) for r in runs), [(r.due_at, r.started_at) for r in runs]
    fired = list(fires.order_by("scheduled_for"))
    assert all(started_on_time(r) for r in fired), [(r.due_at, r.started_at) for r in fired]
    instants = [r.scheduled_for for r in fired]
    assert all((b - a).total_seconds() == 2 for a, b in zip(instants, instants[1:])), instants

    # The queue really is a quorum queue with its delivery limit: RabbitMQ accepts the same
    # declaration and refuses a classic one.
    declare(quorum_queue, quorum_arguments())
    with pytest.raises(PreconditionFailed, match="x-queue-type"):
        declare(quorum_queue, {"x-queue-type": "classic"})


PUBLISH_SHORT_DELAYS = """
from tasks_app import services
from tasks_app.models import Task
task = Task.objects.get(pk="quorum-once")
for delay in (0.5, 2.5):
    services.task_schedule_once(task=task, delay_seconds=delay)
"""


def test_a_worker_refuses_a_queue_of_the_other_type_in_one_line(_session_queue: str) -> None:
    name = f"{_session_queue}-was-quorum"
    declare(name, quorum_arguments())
    try:
        done = subprocess.run(
            [sys.executable, "-m", "celery", "-A", "project", "worker", "--concurrency", "1"],
            cwd=ROOT,
            env=process_env(TASKS_QUEUE_TYPE="classic", TASKS_DEFAULT_QUEUE=name),
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        with broker() as conn:
            delete(conn, queue=name, exchange=name)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert f"queue {name!r}" in last and "cannot change type in place" in last, done.stderr
    assert "Traceback" not in done.stderr
