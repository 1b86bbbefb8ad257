"""/metrics after a worker was killed mid-run: the interrupted runs are counted, and the
scrape keeps answering (a status column too narrow for ``interrupted`` made every scrape
fail from the first interruption on)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tasks_app import services
from tasks_app.models import Run, RunStatus
from tasks_app.services import run_tally
from tests.processes import wait_until
from tests.shared import runs_total, scrape

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

RUNS = 4


def test_metrics_answers_and_counts_interrupted_runs_after_a_worker_is_killed(
    client, worker_factory, monkeypatch
) -> None:
    task = services.task_create(id="slow", action="sleep", payload={"seconds": 2})
    first = worker_factory(concurrency=2)
    ids = [services.task_execute(task=task).pk for _ in range(RUNS)]
    running = Run.objects.filter(task=task, status=RunStatus.RUNNING)
    wait_until(running.exists, timeout=20, interval=0.05, message="a running run")
    first.kill()  # SIGKILL to the worker and its pool: the running runs are cut off
    cut_off = set(running.values_list("id", flat=True))
    assert cut_off

    worker_factory(concurrency=2)  # the broker redelivers the killed worker's messages
    done = Run.objects.filter(task=task, status=RunStatus.COMPLETED)
    waiting = Run.objects.filter(
        task=task, status__in=[RunStatus.PENDING, RunStatus.QUEUED, RunStatus.RUNNING]
    )
    wait_until(
        lambda: done.count() == RUNS and not waiting.exists(),
        timeout=60,
        message=f"{RUNS} completed runs",
    )
    interrupted = set(
        Run.objects.filter(task=task, status=RunStatus.INTERRUPTED).values_list("id", flat=True)
    )
    assert interrupted == cut_off
    assert set(ids) >= interrupted  # first attempts cut off; their next attempts completed

    # The tally counts runs finished a while ago (run_tally.TALLY_LAG): make "a while" now,
    # so that this scrape writes the interrupted runs into the tally table.
    monkeypatch.setattr(run_tally, "TALLY_LAG", timedelta(0))
    for _ in range(2):  # the scrape that writes the tally, and the one after it
        samples = scrape(client)  # asserts 200
        assert runs_total(samples, "interrupted", "sleep") == len(cut_off)
        assert runs_total(samples, "completed", "sleep") == RUNS
