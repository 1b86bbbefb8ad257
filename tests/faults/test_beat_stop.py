"""A deploy of beat: SIGTERM while it releases a backlog. Beat finishes the pass in progress
before it exits, so every run it marked ``queued`` has its message in the broker; none is
left to the sweep, which would find it only ``TASKS_REQUEUE_AFTER_SECONDS`` (2 minutes)
past its due time."""

from __future__ import annotations

import signal
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from django.db import connection

from tasks_app.beat.sweep import ready_messages
from tasks_app.models import Run, RunStatus, Task
from tests.processes import delete_queue, wait_until

from .conftest import Figures, StartProc

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

RUNS = 10_000  # a few seconds of publishing: the stop lands in the middle of it


@pytest.fixture
def unconsumed_queue() -> Iterator[str]:
    """A queue no worker consumes: what beat published stays there to be counted."""
    name = f"beat-stop-{uuid.uuid4().hex[:8]}"
    yield name
    delete_queue(name)


def test_beat_stopped_mid_release_leaves_no_queued_run_without_its_message(
    fault_beat: StartProc, unconsumed_queue: str, figures: Figures
) -> None:
    task = Task.objects.create(id="backlog", action="noop", queue=unconsumed_queue)
    with connection.cursor() as cur:
        cur.execute(
            """INSERT INTO tasks_app_run (id, task_id, trigger, status, attempt, interruptions,
                   scheduled_for, due_at, created_at, worker, output, truncated, error)
               SELECT gen_random_uuid(), %s, 'api', 'pending', 1, 0, now(), now(), now(),
                      '', '', false, ''
                 FROM generate_series(1, %s)""",
            [task.pk, RUNS],
        )
    beat = fault_beat()
    queued = Run.objects.filter(task=task, status=RunStatus.QUEUED)
    wait_until(queued.exists, timeout=60, interval=0.01, message="beat releasing the backlog")
    at_sigterm = queued.count()
    signalled = time.monotonic()
    beat.stop(signal.SIGTERM, timeout=30)  # SIGKILL after that, as a platform does
    exited_after = round(time.monotonic() - signalled, 2)

    statuses = Counter(Run.objects.filter(task=task).values_list("status", flat=True))
    figures(runs=RUNS, queued_at_sigterm=at_sigterm, beat_exited_after_s=exited_after, **statuses)
    assert beat.popen.returncode == 0, beat.log()[-3000:]  # it exited, not killed
    assert set(statuses) <= {RunStatus.PENDING, RunStatus.QUEUED}
    assert at_sigterm < RUNS  # the stop came in the middle of the release
    # 0 if nothing was ever published to it (never declared)
    assert ready_messages(unconsumed_queue) == statuses[RunStatus.QUEUED]
