"""Input edges and bounds through the API: each bad input is a 4xx naming the field, and
the database is unchanged (tasks, runs, beat entries, audit). docs/input-rules.md has the
same table.

Bodies are sent as raw bytes where the edge is in the encoding itself (a lone surrogate as
a JSON escape, bytes that are not UTF-8, 900 levels of nesting), as a client would send them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.models import Task, TaskState
from tasks_app.vocabulary.validation import too_deep_at
from tests.stored_rows import counts

pytestmark = pytest.mark.django_db

END_OF_TIME = "9999-12-31T23:59:59Z"


def raw(body: str) -> bytes:
    """JSON text as a client writes it (escapes such as \\ud800 stay escapes)."""
    return body.encode("utf-8")


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


# name: (method, path, body: dict | bytes | None, status, field, text in the message)
CASES: dict[str, tuple[str, str, Any, int, str, str]] = {
    "lone surrogate in a payload string": (
        "post",
        "/api/tasks",
        raw('{"id": "t", "action": "echo", "payload": {"message": "\\ud800"}}'),
        400,
        "payload.message",
        "lone surrogates",
    ),
    "lone surrogate in the name": (
        "post",
        "/api/tasks",
        raw('{"id": "t", "action": "noop", "name": "\\udfff"}'),
        400,
        "name",
        "lone surrogates",
    ),
    "lone surrogate in a payload key": (
        "post",
        "/api/tasks",
        raw('{"id": "t", "action": "noop", "payload": {"\\ud83d": 1}}'),
        400,
        "payload",
        "lone surrogates",
    ),
    "NUL in the description": (
        "post",
        "/api/tasks",
        raw('{"id": "t", "action": "noop", "description": "a\\u0000b"}'),
        400,
        "description",
        "NUL",
    ),
    "payload nested 900 levels": (
        "post",
        "/api/tasks",
        raw('{"id": "t", "action": "noop", "payload": {"a": ' + nested(900) + "}}"),
        400,
        "payload",
        "deeper than 32 levels",
    ),
    "body nested 100,000 levels": (
        "post",
        "/api/tasks",
        raw(nested(100_000)),
        400,
        "non_field_errors",
        "deeper than 32 levels",
    ),
    "body that is not UTF-8": (
        "post",
        "/api/tasks",
        b'{"id": "caf\xe9", "action": "noop"}',
        400,
        "",
        "JSON parse error",
    ),
    "body that is not JSON": ("post", "/api/tasks", b"{not json", 400, "", "JSON parse error"),
    "payload number 1e400 (infinite once read)": (
        "post",
        "/api/tasks",
        b'{"id": "edge", "action": "noop", "payload": {"n": 1e400}}',
        400,
        "payload.n",
        "numbers must be finite",
    ),
    "payload NaN": (
        "post",
        "/api/tasks",
        b'{"id": "edge", "action": "noop", "payload": {"n": [NaN]}}',
        400,
        "payload.n.0",
        "numbers must be finite",
    ),
    "run now with 1e400": (
        "post",
        "/api/tasks/ok/execute",
        b'{"payload": {"n": -1e400}}',
        400,
        "payload.n",
        "numbers must be finite",
    ),
    "cron with Arabic-Indic digits": (
        "post",
        "/api/tasks",
        {"id": "t", "action": "noop", "schedule_type": "cron", "cron": "\u0661 * * * *"},
        400,
        "cron",
        "is not a number (digits 0-9)",
    ),
    "cron step with Devanagari digits": (
        "post",
        "/api/tasks",
        {"id": "t", "action": "noop", "schedule_type": "cron", "cron": "*/\u096b * * * *"},
        400,
        "cron",
        "must be a positive number",
    ),
    "queue name with a slash": (
        "post",
        "/api/tasks",
        {"id": "t", "action": "noop", "queue": "a/b"},
        400,
        "queue",
        "'/'",
    ),
    "queue no worker consumes": (
        "post",
        "/api/tasks",
        {"id": "t", "action": "noop", "queue": "nobody-listens"},
        400,
        "queue",
        "not a configured queue",
    ),
    "priority 2**40": (
        "post",
        "/api/tasks",
        {"id": "t", "action": "noop", "priority": 2**40},
        400,
        "priority",
        "less than or equal to 9",
    ),
    "max_retries 101": (
        "post",
        "/api/tasks",
        {"id": "t", "action": "noop", "max_retries": 101},
        400,
        "max_retries",
        "less than or equal to 100",
    ),
    "timeout_seconds 0": (
        "post",
        "/api/tasks",
        {"id": "t", "action": "noop", "timeout_seconds": 0},
        400,
        "timeout_seconds",
        "greater than or equal to 1",
    ),
    "catchup_window_seconds 10**15": (
        "post",
        "/api/tasks",
        {"id": "t", "action": "noop", "catchup_window_seconds": 10**15},
        400,
        "catchup_window_seconds",
        "less than or equal to 31622400",
    ),
    "expires_after_seconds 10**15": (
        "post",
        "/api/tasks",
        {"id": "t", "action": "noop", "expires_after_seconds": 10**15},
        400,
        "expires_after_seconds",
        "less than or equal to 31622400",
    ),
    "jitter_seconds over a day": (
        "post",
        "/api/tasks",
        {"id": "t", "action": "noop", "jitter_seconds": 86401},
        400,
        "jitter_seconds",
        "less than or equal to 86400",
    ),
    "pause_after_failures 10,001": (
        "post",
        "/api/tasks",
        {"id": "t", "action": "noop", "pause_after_failures": 10_001},
        400,
        "pause_after_failures",
        "less than or equal to 10000",
    ),
    "max_runs past the integer column": (
        "post",
        "/api/tasks",
        {"id": "t", "action": "noop", "max_runs": 2**31},
        400,
        "max_runs",
        "less than or equal to 2147483647",
    ),
    "keep_runs_days past what a cutoff date can be": (
        "post",
        "/api/tasks",
        {"id": "t", "action": "noop", "keep_runs_days": 10**6},
        400,
        "keep_runs_days",
        "less than or equal to 36525",
    ),
    "interval_seconds 10**20": (
        "post",
        "/api/tasks",
        {"id": "t", "action": "noop", "schedule_type": "interval", "interval_seconds": 10**20},
        400,
        "interval_seconds",
        "less than or equal to",
    ),
    "start_at at the end of time": (
        "post",
        "/api/tasks",
        {
            "id": "t",
            "action": "noop",
            "schedule_type": "interval",
            "interval_seconds": 60,
            "start_at": END_OF_TIME,
        },
        400,
        "start_at",
        "between 1970-01-01",
    ),
    "once run_at at the end of time": (
        "post",
        "/api/tasks",
        {"id": "t", "action": "noop", "schedule_type": "once", "run_at": END_OF_TIME},
        400,
        "run_at",
        "must be at most 365 days (31,536,000 s) from now",
    ),
    "schedule: delay 1e308 s": (
        "post",
        "/api/tasks/ok/schedule",
        {"delay_seconds": 1e308},
        400,
        "delay_seconds",
        "at most",
    ),
    "schedule: cron with a non-ASCII digit": (
        "post",
        "/api/tasks/ok/schedule",
        {"schedule_type": "cron", "cron": "0 \u0669 * * *"},
        400,
        "cron",
        "digits 0-9",
    ),
    "backfill up to year 9999": (
        "post",
        "/api/tasks/ok/backfill",
        {"start": "2026-01-01T00:00:00Z", "end": END_OF_TIME},
        400,
        "end",
        "between 1970-01-01",
    ),
    "pause note with a lone surrogate": (
        "post",
        "/api/tasks/ok/pause",
        raw('{"note": "\\udc80"}'),
        400,
        "note",
        "lone surrogates",
    ),
    "update: queue a/b": (
        "patch",
        "/api/tasks/ok",
        {"queue": "a/b"},
        400,
        "queue",
        "'/'",
    ),
    "preview count 10**20": (
        "get",
        "/api/tasks/ok/preview?count=100000000000000000000",
        None,
        400,
        "count",
        "must be between 1 and 100",
    ),
    "rate limit that is a number": (
        "post",
        "/api/tasks",
        {"id": "t", "action": "noop", "rate_limit": "10"},
        400,
        "rate_limit",
        "Use <starts>/<period>",
    ),
    "limit per key without a key": (
        "post",
        "/api/tasks",
        {"id": "t", "action": "noop", "concurrency_limit_per_key": 2},
        400,
        "concurrency_limit_per_key",
        "needs flow_key",
    ),
    "negative concurrency limit": (
        "post",
        "/api/tasks",
        {"id": "t", "action": "noop", "concurrency_limit": -1},
        400,
        "concurrency_limit",
        "greater than or equal to 1",
    ),
    "page 10**30": (
        "get",
        "/api/tasks?page=1000000000000000000000000000000",
        None,
        400,
        "page",
        "less than or equal to",
    ),
}


def send(api: APIClient, method: str, path: str, body: Any) -> Any:
    if body is None:
        return getattr(api, method)(path)
    if isinstance(body, bytes):
        return getattr(api, method)(path, data=body, content_type="application/json")
    return getattr(api, method)(path, body, format="json")


def test_the_table_has_at_least_25_rows() -> None:
    assert len(CASES) >= 25


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_refused_naming_the_field_and_writes_nothing(
    api: APIClient, case: str
) -> None:
    method, path, body, status, field, text = CASES[case]
    services.task_create(id="ok", action="noop", schedule_type="interval", interval_seconds=60)
    before = counts()
    stored = Task.objects.values().get(pk="ok")

    response = send(api, method, path, body)

    assert response.status_code == status, response.content
    error = response.json()
    assert set(error) == {"error", "detail"} and "\n" not in error["error"]
    if field:
        assert any(text in m for m in error["detail"][field]), error
    else:
        assert text in error["error"], error
    assert counts() == before
    assert Task.objects.values().get(pk="ok") == stored


def stored_row(task_id: str, **columns: object) -> Task:
    """A row as an older release may have stored it (written past today's rules)."""
    task = services.task_create(
        id=task_id, action="noop", schedule_type="interval", interval_seconds=60
    )
    state = {name: columns.pop(name) for name in ["next_run_at"] if name in columns}
    Task.objects.filter(pk=task.pk).update(**columns)
    TaskState.objects.filter(pk=task.pk).update(**state)
    return task


@pytest.mark.parametrize(
    ("columns", "field"),
    [
        (
            {"start_at": datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC), "next_run_at": None},
            "start_at",
        ),
        ({"next_run_at": datetime(9999, 12, 31, 10, tzinfo=UTC)}, "next_run_at"),
        ({"end_at": datetime(1, 1, 1, tzinfo=UTC), "next_run_at": None}, "end_at"),
        ({"timezone": "Mars/Olympus", "schedule_type": "cron", "cron": "0 9 * * *"}, "timezone"),
        ({"schedule_type": "cron", "cron": "\u0661 * * * *", "next_run_at": None}, "cron"),
    ],
)
def test_preview_of_a_stored_row_it_cannot_compute_is_400_naming_the_field(
    api: APIClient, columns: dict[str, object], field: str
) -> None:
    stored_row("legacy", **columns)
    before = counts()
    response = api.get("/api/tasks/legacy/preview")
    assert response.status_code == 400, response.content
    assert field in response.json()["detail"]
    assert counts() == before


def test_execute_of_a_stored_row_on_a_queue_no_worker_reads_is_400_naming_the_queue(
    api: APIClient,
) -> None:
    stored_row("legacy", queue="a/b")
    stored_row("retired", queue="reports")  # TASKS_QUEUES no longer lists it
    before = counts()
    for task_id in ("legacy", "retired"):
        response = api.post(f"/api/tasks/{task_id}/execute")
        assert response.status_code == 400, response.content
        assert "edit the task's queue" in response.json()["detail"]["queue"][0]
    assert counts() == before


def test_the_database_refuses_numbers_outside_the_bounds_too() -> None:
    task = services.task_create(id="ok", action="noop")
    for column, value in [
        ("catchup_window_seconds", 10**9),
        ("priority", 10),
        ("jitter_seconds", 86401),
        ("keep_runs_days", 10**6),
    ]:
        with pytest.raises(IntegrityError, match=f"task_{column}_range"), transaction.atomic():
            Task.objects.filter(pk=task.pk).update(**{column: value})


def test_the_openapi_document_states_the_bounds(api: APIClient) -> None:
    document = json.loads(api.get("/api/schema", {"format": "json"}).content)
    task = document["components"]["schemas"]["TaskCreateRequest"]["properties"]
    assert task["catchup_window_seconds"]["maximum"] == 31622400
    assert (task["priority"]["minimum"], task["priority"]["maximum"]) == (0, 9)


def test_a_body_too_deep_for_the_parser_still_names_the_field() -> None:
    """Where the JSON parser itself runs out of stack depends on the stack it ran on: the
    field is then found by a scan that does not recurse."""
    body = '{"id": "t", "name": "a \\" {[", "payload": {"a": ' + nested(100_000) + "}}"
    assert too_deep_at(body) == "payload"
    assert too_deep_at('{"payload": ' + nested(5) + "}") is None


def test_a_payload_over_a_mib_is_refused_naming_it_whatever_the_body_limit(
    api: APIClient, settings
) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4 * 1024 * 1024
    task = services.task_create(id="ok", action="echo", payload={"message": "hi"})
    before = counts()
    big = {"message": "a" * (1024 * 1024 + 1)}
    for path, body in (
        ("/api/tasks", {"id": "big", "action": "echo", "payload": big}),
        (f"/api/tasks/{task.pk}/execute", {"payload": big}),
    ):
        response = api.post(path, body, format="json")
        assert response.status_code == 400, response.content[:300]
        assert response.json()["detail"]["payload"] == ["is larger than 1,048,576 bytes as JSON"]
    assert counts() == before
