"""Bad input: each case answers the documented JSON error and writes nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.conf import app_settings
from tasks_app.models import Run, RunStatus, Task, TaskAuditEntry
from tests.shared import assert_error
from tests.stored_rows import run_set

pytestmark = pytest.mark.django_db


def snapshot() -> tuple[int, int, int]:
    return Task.objects.count(), Run.objects.count(), TaskAuditEntry.objects.count()


def soon(seconds: float) -> str:
    return (timezone.now() + timedelta(seconds=seconds)).isoformat()


CREATE_CASES = {
    "unknown action": ({"id": "t", "action": "no-such-action"}, "action", "unknown action"),
    "payload not matching schema": (
        {"id": "t", "action": "echo", "payload": {"message": 5}},
        "payload",
        "does not fit",
    ),
    "payload missing required key": (
        {"id": "t", "action": "echo", "payload": {}},
        "payload",
        "'message' is a required property",
    ),
    "malformed cron": (
        {"id": "t", "action": "noop", "schedule_type": "cron", "cron": "61 * * *"},
        "cron",
        "invalid cron",
    ),
    "unknown time zone": (
        {
            "id": "t",
            "action": "noop",
            "schedule_type": "cron",
            "cron": "0 9 * * *",
            "timezone": "Mars/Olympus",
        },
        "timezone",
        "Mars/Olympus",
    ),
    "negative delay": (
        {"id": "t", "action": "noop", "delay_seconds": -5},
        "delay_seconds",
        "must not be negative",
    ),
    "delay beyond the maximum": (
        {"id": "t", "action": "noop", "delay_seconds": app_settings.MAX_DELAY_SECONDS + 1},
        "delay_seconds",
        "at most",
    ),
    "run_at in the past beyond grace": (
        {"id": "t", "action": "noop", "run_at": "PAST"},
        "run_at",
        "in the past",
    ),
    "both delay_seconds and run_at": (
        {"id": "t", "action": "noop", "delay_seconds": 10, "run_at": "FUTURE"},
        "delay_seconds",
        "not both",
    ),
    "naive run_at": (
        {"id": "t", "action": "noop", "run_at": "2030-01-01T09:00:00"},
        "run_at",
        "offset",
    ),
    "bad task id": ({"id": "has spaces", "action": "noop"}, "id", "letters, digits"),
    "unknown field": ({"id": "t", "action": "noop", "delay": 10}, "delay", "unknown field"),
    "priority out of range": ({"id": "t", "action": "noop", "priority": 12}, "priority", "9"),
    "NUL in a string": (
        {"id": "t", "action": "echo", "payload": {"message": "a\u0000b"}},
        "payload.message",
        "NUL",
    ),
    "queue name with a slash": ({"id": "t", "action": "noop", "queue": "a/b"}, "queue", "'/'"),
    "RabbitMQ's reserved queue prefix": (
        {"id": "t", "action": "noop", "queue": "amq.mine"},
        "queue",
        "amq.",
    ),
    "catchup window overflowing date arithmetic": (
        {"id": "t", "action": "noop", "catchup_window_seconds": 10**15},
        "catchup_window_seconds",
        "less than or equal",
    ),
    "expiry overflowing date arithmetic": (
        {"id": "t", "action": "noop", "expires_after_seconds": 10**15},
        "expires_after_seconds",
        "less than or equal",
    ),
    "expiry beyond a year": (
        {"id": "t", "action": "noop", "expires_after_seconds": 367 * 86400},
        "expires_after_seconds",
        "less than or equal",
    ),
    "start_at at the end of time": (
        {
            "id": "t",
            "action": "noop",
            "schedule_type": "interval",
            "interval_seconds": 60,
            "start_at": "9999-12-31T23:59:59Z",
        },
        "start_at",
        "between 1970-01-01",
    ),
    "start_at at the start of time": (
        {
            "id": "t",
            "action": "noop",
            "schedule_type": "cron",
            "cron": "0 9 * * *",
            "start_at": "0001-01-01T00:00:00Z",
        },
        "start_at",
        "between 1970-01-01",
    ),
    "expires_at at the end of time": (
        {"id": "t", "action": "noop", "delay_seconds": 5, "expires_at": "9999-12-31T23:59:59Z"},
        "expires_at",
        "between 1970-01-01",
    ),
    "expiry before due": (
        {"id": "t", "action": "noop", "delay_seconds": 60, "expires_at": "PAST"},
        "expires_at",
        "after",
    ),
}


@pytest.mark.parametrize("case", CREATE_CASES)
def test_bad_create_is_400_and_writes_nothing(api: APIClient, case: str) -> None:
    body, field, text = CREATE_CASES[case]
    body = {
        k: (soon(-3600) if v == "PAST" else soon(3600) if v == "FUTURE" else v)
        for k, v in body.items()
    }
    before = snapshot()
    response = api.post("/api/tasks", body, format="json")
    error = assert_error(response, 400, field)
    assert any(text in message for message in error["detail"][field]), error
    assert snapshot() == before


def test_bad_expiry_rolls_back_the_task_created_in_the_same_call(api: APIClient) -> None:
    # task_create succeeds, then task_schedule_once refuses the expiry: no task stays behind.
    response = api.post(
        "/api/tasks",
        {"id": "reminder", "action": "noop", "delay_seconds": 60, "expires_at": soon(30)},
        format="json",
    )
    assert_error(response, 400, "expires_at")
    assert not Task.objects.filter(pk="reminder").exists()
    assert snapshot() == (0, 0, 0)


def test_duplicate_task_id_is_409(api: APIClient) -> None:
    services.task_create(id="taken", action="noop", name="first")
    before = snapshot()
    response = api.post(
        "/api/tasks", {"id": "taken", "action": "echo", "payload": {"message": "x"}}, format="json"
    )
    body = assert_error(response, 409)
    assert "taken" in body["error"] and "already exists" in body["error"]
    assert snapshot() == before
    assert Task.objects.get(pk="taken").name == "first"


def test_non_json_body_is_400(api: APIClient) -> None:
    before = snapshot()
    response = api.post("/api/tasks", data="{not json", content_type="application/json")
    body = assert_error(response, 400)
    assert body["error"].startswith("JSON parse error")
    assert snapshot() == before


def test_form_encoded_body_is_415(api: APIClient) -> None:
    before = snapshot()
    response = api.post(
        "/api/tasks", data="id=x&action=noop", content_type="application/x-www-form-urlencoded"
    )
    body = assert_error(response, 415)
    assert "Unsupported media type" in body["error"]
    assert snapshot() == before


def test_body_over_the_size_limit_is_413(api: APIClient) -> None:
    before = snapshot()
    message = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 10)
    response = api.post(
        "/api/tasks",
        {"id": "big", "action": "echo", "payload": {"message": message}},
        format="json",
    )
    body = assert_error(response, 413)
    assert str(settings.DATA_UPLOAD_MAX_MEMORY_SIZE) in body["error"]
    assert snapshot() == before


def test_cancelling_a_finished_run_is_409(api: APIClient) -> None:
    task = services.task_create(id="done", action="noop")
    run = services.task_execute(task=task)
    run_set(run.pk, status=RunStatus.COMPLETED, finished_at=timezone.now())
    before = snapshot()
    body = assert_error(api.post(f"/api/runs/{run.id}/cancel"), 409)
    assert "completed" in body["error"]
    assert Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED
    assert snapshot() == before


def test_retrying_a_completed_run_is_409(api: APIClient) -> None:
    task = services.task_create(id="done", action="noop")
    run = services.task_execute(task=task)
    run_set(run.pk, status=RunStatus.COMPLETED)
    before = snapshot()
    assert_error(api.post(f"/api/runs/{run.id}/retry"), 409)
    assert snapshot() == before


SCHEDULE_CASES = {
    "negative delay": ({"delay_seconds": -1}, "delay_seconds"),
    "delay beyond the maximum": (
        {"delay_seconds": app_settings.MAX_DELAY_SECONDS * 2},
        "delay_seconds",
    ),
    "run_at in the past": ({"run_at": "PAST"}, "run_at"),
    "both delay_seconds and run_at": ({"delay_seconds": 5, "run_at": "FUTURE"}, "delay_seconds"),
    "neither": ({}, "delay_seconds"),
    "malformed cron": ({"schedule_type": "cron", "cron": "* * *"}, "cron"),
    "unknown time zone": (
        {"schedule_type": "cron", "cron": "0 9 * * *", "timezone": "Nowhere/Land"},
        "timezone",
    ),
    "one-off mixed with recurring": (
        {"delay_seconds": 5, "schedule_type": "interval", "interval_seconds": 5},
        "schedule_type",
    ),
    "negative expiry": ({"delay_seconds": 5, "expires_in_seconds": -1}, "expires_in_seconds"),
}


@pytest.mark.parametrize("case", SCHEDULE_CASES)
def test_bad_schedule_is_400_and_writes_nothing(api: APIClient, case: str) -> None:
    services.task_create(id="sched", action="noop")
    body, field = SCHEDULE_CASES[case]
    body = {
        k: (soon(-3600) if v == "PAST" else soon(3600) if v == "FUTURE" else v)
        for k, v in body.items()
    }
    before = snapshot()
    assert_error(api.post("/api/tasks/sched/schedule", body, format="json"), 400, field)
    assert snapshot() == before
    assert Task.objects.get(pk="sched").schedule_type == "none"


def test_bad_update_is_400_and_changes_nothing(api: APIClient) -> None:
    services.task_create(id="keep", action="echo", payload={"message": "hi"}, name="kept")
    before = snapshot()
    assert_error(
        api.patch("/api/tasks/keep", {"name": "new", "payload": {"message": 1}}, format="json"),
        400,
        "payload",
    )
    assert_error(
        api.patch("/api/tasks/keep", {"status": "completed"}, format="json"), 400, "status"
    )
    task = Task.objects.get(pk="keep")
    assert (task.name, task.payload) == ("kept", {"message": "hi"})
    assert snapshot() == before


def test_missing_things_are_404(api: APIClient) -> None:
    assert_error(api.get("/api/tasks/nope"), 404)
    assert_error(api.post("/api/tasks/nope/execute"), 404)
    assert_error(api.get("/api/runs/00000000-0000-0000-0000-000000000000"), 404)
    assert_error(api.get("/api/runs/not-a-uuid"), 400, "run_id")
    assert_error(api.post("/api/runs/not-a-uuid/cancel"), 400, "run_id")


def test_bad_filters_and_nul_in_path_are_400(api: APIClient) -> None:
    assert_error(api.get("/api/runs", {"status": "exploded"}), 400, "status")
    assert_error(api.get("/api/runs", {"due_after": "yesterday"}), 400, "due_after")
    assert_error(api.get("/api/tasks", {"search": "a\x00b"}), 400, "search")
    assert_error(api.get("/api/tasks/a%00b"), 400, "task_id")
    assert_error(api.get("/api/tasks/x/preview", {"count": "many"}), 404)


WRONG_TYPES = {
    "number for a string": ("/api/tasks/typed/pause", "post", {"note": 0}, "note"),
    "string for an integer": ("/api/tasks/typed", "patch", {"priority": "5"}, "priority"),
    "float for an integer": ("/api/tasks/typed", "patch", {"max_retries": 1.5}, "max_retries"),
    "bool for an integer": ("/api/tasks/typed", "patch", {"priority": True}, "priority"),
    "string for a number": (
        "/api/tasks/typed/schedule",
        "post",
        {"delay_seconds": "60"},
        "delay_seconds",
    ),
    "number for a date-time": ("/api/tasks/typed/schedule", "post", {"run_at": 0}, "run_at"),
    "null payload": ("/api/tasks/typed", "patch", {"payload": None}, "payload"),
    "array payload": ("/api/tasks/typed", "patch", {"payload": []}, "payload"),
}


@pytest.mark.parametrize("case", WRONG_TYPES)
def test_a_value_of_the_wrong_json_type_is_400_naming_the_field(api: APIClient, case: str) -> None:
    # The OpenAPI document promises these types; DRF alone would coerce 0 to "0", "5" to 5.
    services.task_create(id="typed", action="noop")
    path, method, body, field = WRONG_TYPES[case]
    before = snapshot()
    assert_error(getattr(api, method)(path, body, format="json"), 400, field)
    assert snapshot() == before
    task = Task.objects.get(pk="typed")
    assert (task.paused, task.priority, task.payload) == (False, 5, {})


def test_an_integral_float_is_an_integer(api: APIClient) -> None:
    services.task_create(id="typed", action="noop")
    response = api.patch("/api/tasks/typed", {"priority": 7.0}, format="json")
    assert response.status_code == 200 and response.json()["priority"] == 7


def test_bad_page_parameters_are_400_naming_them(api: APIClient) -> None:
    assert_error(api.get("/api/tasks", {"page": "two"}), 400, "page")
    assert_error(api.get("/api/runs", {"page": 0}), 400, "page")
    assert_error(api.get("/api/runs", {"page_size": 501}), 400, "page_size")
    assert_error(api.get("/api/actions", {"page": 99}), 404)
    body = api.get("/api/actions", {"page_size": 1}).json()
    assert (
        set(body) == {"count", "count_exact", "next", "previous", "results"}
        and len(body["results"]) == 1
    )


def post_raw(api: APIClient, path: str, body: str):
    return api.generic("POST", path, body.encode(), content_type="application/json")


RAW_CASES = {
    "lone surrogate in a payload string": (
        '{"id": "t", "action": "echo", "payload": {"message": "a\\ud800b"}}',
        "payload.message",
        "surrogate",
    ),
    "lone surrogate in a payload key": (
        '{"id": "t", "action": "noop", "payload": {"\\udfff": 1}}',
        "payload",
        "surrogate",
    ),
    "nested one level too deep": (
        '{"id": "t", "action": "noop", "payload": {"a": ' + "[" * 32 + "]" * 32 + "}}",
        "payload",
        "deeper than 32",
    ),
    "nested past Python's recursion limit": (
        '{"id": "t", "action": "noop", "payload": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}",
        "payload",
        "deeper than 32",
    ),
}


@pytest.mark.parametrize("case", RAW_CASES)
def test_unstorable_json_is_400_at_the_edge(api: APIClient, case: str) -> None:
    body, field, text = RAW_CASES[case]
    before = snapshot()
    error = assert_error(post_raw(api, "/api/tasks", body), 400, field)
    assert any(text in message for message in error["detail"][field]), error
    assert snapshot() == before


def test_nesting_up_to_the_limit_is_stored(api: APIClient) -> None:
    deep = '{"id": "t", "action": "noop", "payload": {"a": ' + "[" * 31 + "]" * 31 + "}}"
    assert post_raw(api, "/api/tasks", deep).status_code == 201


def test_preview_of_a_schedule_near_the_bounds_answers(api: APIClient) -> None:
    late = (timezone.now() + timedelta(days=36000)).isoformat()
    created = api.post(
        "/api/tasks",
        {
            "id": "late",
            "action": "noop",
            "schedule_type": "cron",
            "cron": "0 9 * * *",
            "timezone": "Pacific/Kiritimati",
            "start_at": late,
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    preview = api.get("/api/tasks/late/preview", {"count": 3})
    assert preview.status_code == 200 and len(preview.json()["fires"]) == 3


def test_backfill_bounds_are_400_naming_the_field(api: APIClient) -> None:
    services.task_create(id="bf", action="noop", schedule_type="interval", interval_seconds=60)
    before = snapshot()
    response = api.post(
        "/api/tasks/bf/backfill",
        {"start": "0001-01-01T00:00:00Z", "end": "9999-12-31T23:59:59Z"},
        format="json",
    )
    error = assert_error(response, 400, "start", "end")
    assert "between 1970-01-01" in error["detail"]["start"][0]
    assert snapshot() == before


def test_edge_rules_live_below_the_api_so_admin_and_cli_get_them_too() -> None:
    from django.core.exceptions import ValidationError

    for fields, field in [
        ({"queue": "a/b"}, "queue"),
        ({"catchup_window_seconds": 10**15}, "catchup_window_seconds"),
        (
            {"schedule_type": "interval", "interval_seconds": 60, "start_at": "9999"},
            "start_at",
        ),
    ]:
        if fields.get("start_at") == "9999":
            fields["start_at"] = timezone.now().replace(year=9999)
        with pytest.raises(ValidationError) as refused:
            services.task_create(id="below", action="noop", **fields)
        assert field in refused.value.message_dict, refused.value
    assert not Task.objects.exists()
