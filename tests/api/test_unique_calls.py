"""Unique calls through the API: ``unique_key``, ``unique_for_seconds`` and ``on_duplicate``
on ``POST /api/tasks/{id}/execute`` and on a one-off ``POST /api/tasks/{id}/schedule``."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.models import Run, RunStatus

pytestmark = pytest.mark.django_db


def test_a_duplicate_run_now_answers_200_with_the_first_run(api: APIClient) -> None:
    services.task_create(id="report", action="noop")
    first = api.post("/api/tasks/report/execute", {"unique_key": "invoice-7"}, "json")
    assert first.status_code == 202, first.content
    assert first.json()["unique_key"] == "invoice-7" and first.json()["deduplicated"] is False
    again = api.post("/api/tasks/report/execute", {"unique_key": "invoice-7"}, "json")
    assert again.status_code == 200, again.content
    assert again.json()["id"] == first.json()["id"] and again.json()["deduplicated"] is True
    assert Run.objects.filter(task_id="report").count() == 1
    assert api.get(f"/api/runs/{first.json()['id']}").json()["unique_key"] == "invoice-7"


def test_a_one_off_run_with_replace_takes_the_waiting_runs_place(api: APIClient) -> None:
    services.task_create(id="report", action="noop")
    body = {"delay_seconds": 600, "unique_key": "k", "on_duplicate": "replace"}
    first = api.post("/api/tasks/report/schedule", body, "json").json()
    second = api.post("/api/tasks/report/schedule", body, "json")
    assert second.status_code == 202 and second.json()["id"] != first["id"]
    old = api.get(f"/api/runs/{first['id']}").json()
    assert old["status"] == RunStatus.CANCELLED
    assert old["error"] == f"cancelled: replaced by run {second.json()['id']}"


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"unique_key": "x" * 201}, "unique_key", "at most 200 characters"),
        ({"unique_key": ""}, "unique_key", "non-empty"),
        ({"unique_key": "k", "unique_for_seconds": -1}, "unique_for_seconds", "between 0"),
        ({"unique_key": "k", "on_duplicate": "merge"}, "on_duplicate", "return, replace"),
        ({"unique_for_seconds": 5}, "unique_for_seconds", "needs a unique_key"),
        ({"unique_key": 5}, "unique_key", ""),
    ],
)
def test_bad_unique_fields_are_400_naming_the_field_and_write_nothing(
    api: APIClient, body: dict, field: str, words: str
) -> None:
    services.task_create(id="report", action="noop")
    for path, extra in (("execute", {}), ("schedule", {"delay_seconds": 60})):
        answer = api.post(f"/api/tasks/report/{path}", {**body, **extra}, "json")
        assert answer.status_code == 400, answer.content
        assert words in str(answer.json()) and field in str(answer.json())
    assert not Run.objects.filter(task_id="report").exists()


def test_a_tasks_unique_policy_is_set_and_refused_through_the_api(api: APIClient) -> None:
    made = api.post(
        "/api/tasks",
        {"id": "hook", "action": "noop", "unique_on": "order", "unique_for_seconds": 30},
        "json",
    )
    assert made.status_code == 201, made.content
    assert made.json()["unique_on"] == "order" and made.json()["debounce"] is False
    bad = api.patch("/api/tasks/hook", {"unique_on": "two words"}, "json")
    assert bad.status_code == 400 and "unique_on" in str(bad.json()), bad.content
    assert "letters, digits" in str(bad.json())
