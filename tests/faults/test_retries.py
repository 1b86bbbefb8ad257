"""Retries: each attempt is its own run row, with growing, jittered gaps; after the last the
run is failed and listed as dead; a manual retry from the API makes one more attempt."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tasks_app import selectors, services
from tasks_app.models import Run, RunStatus, Trigger
from tests.processes import wait_until

from .conftest import Figures, StartProc
from .helpers import chains, settled

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_four_attempts_with_growing_gaps_then_dead_then_manual_retry(
    fault_worker: StartProc, api: APIClient, figures: Figures
) -> None:
    fault_worker()
    task = services.task_create(
        id="flaky",
        action="fail",
        payload={"message": "upstream down"},
        max_retries=3,
        retry_backoff_seconds=1,
    )
    first = services.task_execute(task=task)

    wait_until(lambda: settled(task, 1), timeout=30, message="four attempts")
    attempts = chains(task)[first.id]
    assert [a.attempt for a in attempts] == [1, 2, 3, 4]
    assert [a.status for a in attempts] == [RunStatus.RETRYING] * 3 + [RunStatus.FAILED]
    assert all(a.trigger == Trigger.RETRY and a.first_attempt_id == first.id for a in attempts[1:])
    assert all("upstream down" in a.error for a in attempts)
    # Backoff base 1 s doubling, jitter on the upper half: [0.5, 1], [1, 2], [2, 4] s.
    delays = [(b.due_at - a.finished_at).total_seconds() for a, b in zip(attempts, attempts[1:])]
    for delay, (low, high) in zip(delays, [(0.5, 1), (1, 2), (2, 4)]):
        assert low - 0.01 <= delay <= high + 0.01, delays
    assert delays[0] < delays[1] < delays[2]
    gaps = [(b.started_at - a.finished_at).total_seconds() for a, b in zip(attempts, attempts[1:])]
    assert all(gap >= delay - 0.01 for gap, delay in zip(gaps, delays))  # never early

    last = attempts[-1]
    assert list(selectors.run_list_dead(task_id=task.id)) == [last]
    listed = api.get("/api/runs/dead", {"task": task.id})
    assert listed.status_code == 200
    assert str(last.id) in {r["id"] for r in listed.json()["results"]}

    response = api.post(f"/api/runs/{last.id}/retry")
    assert response.status_code == 202, response.content
    fifth = Run.objects.get(pk=response.json()["id"])
    assert (fifth.attempt, fifth.trigger, fifth.first_attempt_id) == (5, Trigger.RETRY, first.id)
    # A second click on the same failed attempt does not make a sixth.
    assert api.post(f"/api/runs/{last.id}/retry").status_code == 409

    wait_until(lambda: settled(task, 1), timeout=15, message="the fifth attempt")
    fifth.refresh_from_db()
    assert fifth.status == RunStatus.FAILED  # past max_retries: no automatic retry after it
    assert Run.objects.filter(task=task).count() == 5
    assert list(selectors.run_list_dead(task_id=task.id)) == [fifth]
    figures(
        attempts=5,
        retry_delays_s=[round(d, 2) for d in delays],
        start_gaps_s=[round(g, 2) for g in gaps],
    )
