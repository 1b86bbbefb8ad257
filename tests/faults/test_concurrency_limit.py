"""A concurrency limit of 2 held across 500 runs on two workers of 4 processes each, while
one worker is killed with SIGKILL and the other is deployed (SIGTERM, a new worker): the
runs in progress, sampled every 10 ms, and the actions' own executions never exceed 2; every
run completes once."""

from __future__ import annotations

import signal
import threading
import time
from datetime import datetime

import psycopg
import pytest
from django.utils import timezone

from tasks_app import services
from tasks_app.models import Run, RunStatus
from tests import processes
from tests.effects.models import Execution
from tests.processes import wait_until

from .conftest import Figures, StartProc
from .helpers import settled, tally

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

RUNS = 500
LIMIT = 2


class Sampler(threading.Thread):
    """How many of the task's runs are ``running``, read every 10 ms on a connection of its
    own: the highest count seen, and how many samples were taken."""

    def __init__(self, task_id: str) -> None:
        super().__init__(daemon=True)
        self.task_id, self.most, self.samples = task_id, 0, 0
        self.stopped = threading.Event()
        self.url = processes.test_database_url()

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stopped.is_set():
                (count,) = conn.execute(
                    "SELECT count(*) FROM tasks_app_run WHERE task_id = %s AND status = 'running'",
                    [self.task_id],
                ).fetchone() or (0,)
                self.most, self.samples = max(self.most, count), self.samples + 1
                time.sleep(0.01)


def most_at_once(spans: list[tuple[datetime, datetime]]) -> int:
    """The most intervals that overlap at any instant (an end before a start at a tie)."""
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    now = most = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def test_a_limit_of_two_holds_through_a_kill_and_a_deploy(
    fault_worker: StartProc, fault_beat: StartProc, figures: Figures
) -> None:
    fault_beat()
    killed_worker = fault_worker(concurrency=4)
    deployed = fault_worker(concurrency=4, TASKS_SHUTDOWN_GRACE_SECONDS="2")
    task = services.task_create(
        id="limited",
        action="test-effect",
        payload={"seconds": 0.05},
        max_retries=0,
        concurrency_limit=LIMIT,
    )
    sampler = Sampler(task.id)
    sampler.start()
    for _ in range(RUNS):
        services.task_execute(task=task)

    def completed() -> int:
        return Run.objects.filter(task=task, status=RunStatus.COMPLETED).count()

    wait_until(lambda: completed() >= RUNS // 4, timeout=120, message="a quarter completed")
    wait_until(
        lambda: Run.objects.filter(task=task, status=RunStatus.RUNNING).exists(),
        timeout=10,
        interval=0.01,
        message="a running run",
    )
    killed_at = timezone.now()
    killed_worker.kill()
    replacement = fault_worker(concurrency=4)
    wait_until(lambda: completed() >= RUNS // 2, timeout=120, message="half completed")
    deployed.stop(signal.SIGTERM, timeout=10)
    deployed_at = timezone.now()
    fault_worker(concurrency=4)
    wait_until(lambda: settled(task, RUNS), timeout=300, interval=0.5, message="every run")
    sampler.stopped.set()
    sampler.join(timeout=5)
    replacement.stop()

    # The actions' executions: one cut off by the kill or the deploy has no end of its own
    # (its process died then); it counts until that instant.
    spans = []
    for started, finished in Execution.objects.filter(run_id__isnull=False).values_list(
        "at", "finished_at"
    ):
        cut = killed_at if started < killed_at else deployed_at
        spans.append((started, finished or cut))
    result = tally(task)
    figures(
        runs=RUNS,
        limit=LIMIT,
        samples=sampler.samples,
        most_running_sampled=sampler.most,
        most_executing=most_at_once(spans),
        interrupted=Run.objects.filter(task=task, status=RunStatus.INTERRUPTED).count(),
        completed=result.completed,
    )
    assert sampler.samples > 1000
    assert sampler.most == LIMIT  # reached, never exceeded
    assert most_at_once(spans) <= LIMIT
    assert result.completed == RUNS and result.lost == 0 and result.duplicated == 0
    assert not Run.objects.filter(task=task, status=RunStatus.FAILED).exists()
