"""``GET /api/runs/{id}``: the id handed back answers the outcome of all the run's attempts
(retries and interruptions), every attempt listed; any attempt's id answers the same."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.models import Run, RunStatus
from tests.run_chains import complete, fail, flaky_task, interrupt

pytestmark = pytest.mark.django_db


def get_run(api: APIClient, run_id: object) -> dict:
    response = api.get(f"/api/runs/{run_id}")
    assert response.status_code == 200, response.content
    return response.json()


def test_retried_then_completed_answers_completed_for_every_attempt_id(api: APIClient) -> None:
    task = flaky_task("flaky", max_retries=2)
    handed_back = api.post(f"/api/tasks/{task.id}/execute").json()["id"]
    first = Run.objects.select_related("task").get(pk=handed_back)
    second = fail(first, "RuntimeError: disk full")
    third = interrupt(second, worker="w1@host")
    complete(third, worker="w2@host", result={"rows": 3})

    body = get_run(api, handed_back)
    assert body["status"] == RunStatus.RETRYING  # the first attempt itself
    assert body["outcome"] == RunStatus.COMPLETED
    assert body["outcome_attempt"] == str(third.id)
    attempts = body["attempts"]
    assert [(a["id"], a["attempt"], a["status"]) for a in attempts] == [
        (str(first.id), 1, "retrying"),
        (str(second.id), 2, "interrupted"),
        (str(third.id), 3, "completed"),
    ]
    assert attempts[0]["error"] == "RuntimeError: disk full"
    assert attempts[1]["error"].startswith("interrupted (1 of at most")
    assert [a["worker"] for a in attempts] == ["w1@host", "w1@host", "w2@host"]
    assert all(a["started_at"] and a["finished_at"] for a in attempts)
    assert attempts[2]["trigger"] == "retry" and attempts[2]["error"] == ""
    # Any attempt's id answers for the whole run the same way.
    for attempt in (second.id, third.id):
        other = get_run(api, attempt)
        assert other["outcome"] == "completed"
        assert other["attempts"] == attempts


def test_every_retry_failed_answers_failed(api: APIClient) -> None:
    task = flaky_task("doomed", max_retries=1)
    run = services.task_execute(task=task)
    last = fail(fail(run, "boom 1"), "boom 2")
    assert last.status == RunStatus.FAILED
    body = get_run(api, run.id)
    assert body["outcome"] == "failed"
    assert [a["status"] for a in body["attempts"]] == ["retrying", "failed"]
    assert body["attempts"][-1]["error"] == "boom 2"


def test_no_outcome_while_an_attempt_is_still_to_come(api: APIClient) -> None:
    task = flaky_task("pending", max_retries=1)
    run = services.task_execute(task=task)
    assert get_run(api, run.id)["outcome"] is None  # waiting
    retry = fail(run, "boom")
    body = get_run(api, run.id)
    assert body["outcome"] is None  # the retry is waiting for its backoff
    assert body["outcome_attempt"] == str(retry.id)
    # A run retried by hand after failing for good answers the new attempt's outcome.
    failed = fail(retry, "boom again")
    assert get_run(api, run.id)["outcome"] == "failed"
    again = services.run_retry(run=Run.objects.select_related("task").get(pk=failed.pk))
    assert get_run(api, run.id)["outcome"] is None
    complete(Run.objects.select_related("task").get(pk=again.pk))
    assert get_run(api, run.id)["outcome"] == "completed"


def test_the_outcome_is_read_in_the_same_number_of_queries_however_many_attempts(
    api: APIClient,
) -> None:
    def queries(run_id: object) -> int:
        with CaptureQueriesContext(connection) as captured:
            get_run(api, run_id)
        return len(captured)

    task = flaky_task("chains", max_retries=0)
    single = services.task_execute(task=task)
    long = services.task_execute(task=task)
    attempt = long
    for _ in range(3):
        attempt = interrupt(attempt)
    assert len(get_run(api, long.id)["attempts"]) == 4
    assert queries(long.id) == queries(single.id)


def test_an_unknown_run_id_is_404(api: APIClient) -> None:
    response = api.get("/api/runs/00000000-0000-0000-0000-000000000000")
    assert response.status_code == 404
