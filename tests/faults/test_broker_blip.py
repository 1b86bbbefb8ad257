"""The broker closes a worker's connection while it executes runs (a network blip, a broker
failover): their messages are redelivered, to a second, idle worker, although their
executors are alive. The redelivered claim finds each run's executor lock held and ignores
the message; the runs finish where they started — no interruption, no second execution.
Only the first worker's connection is closed (``rabbitmqctl close_connection``); the broker
keeps running."""

from __future__ import annotations

import re
import subprocess

import pytest
from django.conf import settings

from tasks_app import services
from tasks_app.models import Run, RunStatus
from tests.effects.models import Execution
from tests.processes import Proc, wait_until

from .conftest import Figures, StartProc
from .helpers import settled, tally

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

RUNS = 4


def broker_connections_of(proc: Proc) -> list[str]:
    """RabbitMQ's ids of the connections ``proc`` holds (found by their client ports)."""
    sockets = subprocess.run(
        ["ss", "-tnpH", "state", "established", "( dport = :5672 )"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    ports = {
        m.group(1)
        for line in sockets.splitlines()
        if f"pid={proc.popen.pid}," in line
        and (m := re.search(r"127\.0\.0\.1:(\d+)\s+127\.0\.0\.1:5672", line))
    }
    rows = subprocess.run(
        ["rabbitmqctl", "list_connections", "-q", "--no-table-headers", "pid", "peer_port"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return [pid for pid, port in (row.split("\t") for row in rows) if port.strip() in ports]


@pytest.mark.skipif(
    not settings.CELERY_BROKER_URL.startswith("amqp"), reason="closes a RabbitMQ connection"
)
def test_redelivery_while_the_executor_lives_is_ignored(
    fault_worker: StartProc, figures: Figures
) -> None:
    busy = fault_worker(concurrency=RUNS, TASKS_STALL_SECONDS="600")
    task = services.task_create(
        id="blip", action="test-effect", payload={"seconds": 25}, max_retries=0
    )
    for _ in range(RUNS):
        services.task_execute(task=task)
    wait_until(
        lambda: Run.objects.filter(task=task, status=RunStatus.RUNNING).count() == RUNS,
        timeout=30,
        message="every run executing on the first worker",
    )
    connections = broker_connections_of(busy)
    assert connections, "the worker's broker connection was not found"
    idle = fault_worker(concurrency=2, TASKS_STALL_SECONDS="600")
    assert Run.objects.filter(task=task, status=RunStatus.RUNNING).count() == RUNS
    for pid in connections:
        subprocess.run(
            ["rabbitmqctl", "close_connection", pid, "test: broker blip"],
            capture_output=True,
            check=True,
        )
    wait_until(lambda: settled(task, RUNS), timeout=120, interval=0.5, message="every run to end")
    result = tally(task)
    assert result.completed == RUNS and result.effects == RUNS
    assert result.lost == 0 and result.duplicated == 0
    assert not Run.objects.filter(task=task, status=RunStatus.INTERRUPTED).exists()
    assert Execution.objects.count() == RUNS  # no action body ran twice
    ignored = idle.log().count("its executor is alive")
    assert ignored >= 1  # the redeliveries reached the idle worker while the runs went on
    figures(
        runs=RUNS,
        connections_closed=len(connections),
        redeliveries_ignored_executor_alive=ignored,
        interrupted=0,
        executions=Execution.objects.count(),
    )
