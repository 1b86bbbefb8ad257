"""Input edges and bounds through the admin task form: each is an error next to its field
(the form shown again, 200) and the database unchanged. docs/input-rules.md has the table."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from tests.shared import form as task_form
from tests.stored_rows import counts

pytestmark = pytest.mark.django_db


def form(**overrides: str) -> dict[str, str]:
    return task_form(**{"id": "edge-case", "name": "", **overrides})


CRON = {"schedule_type": "cron", "timezone": "UTC"}
INTERVAL = {"schedule_type": "interval", "interval_seconds": "60"}

# name: (form overrides, field, text in its error)
CASES: dict[str, tuple[dict[str, str], str, str]] = {
    "payload with a lone surrogate escape": (
        {"payload": '{"message": "\\ud800"}'},
        "payload",
        "at payload.message: must not contain lone surrogates",
    ),
    "payload with a NUL escape": (
        {"payload": '{"message": "a\\u0000b"}'},
        "payload",
        "NUL",
    ),
    "payload nested 900 levels": (
        {"action": "noop", "payload": '{"a": ' + "[" * 900 + "]" * 900 + "}"},
        "payload",
        "deeper than 32 levels",
    ),
    "cron with Arabic-Indic digits": (
        {**CRON, "cron": "\u0661 * * * *"},
        "cron",
        "is not a number (digits 0-9)",
    ),
    "queue with a slash": ({"queue": "a/b"}, "queue", "'/'"),
    "queue no worker consumes": ({"queue": "nobody-listens"}, "queue", "TASKS_QUEUES"),
    "priority 10": ({"priority": "10"}, "priority", "less than or equal to 9"),
    "max_retries 101": ({"max_retries": "101"}, "max_retries", "less than or equal to 100"),
    "catchup window 10**9 s": (
        {"catchup_window_seconds": str(10**9)},
        "catchup_window_seconds",
        "less than or equal to 31622400",
    ),
    "jitter over a day": (
        {**INTERVAL, "interval_seconds": "172800", "jitter_seconds": "90000"},
        "jitter_seconds",
        "less than or equal to 86400",
    ),
    "pause after 10,001 failures": (
        {"pause_after_failures": "10001"},
        "pause_after_failures",
        "less than or equal to 10000",
    ),
    "start_at in year 9999": (
        {**INTERVAL, "start_at_0": "9999-12-31", "start_at_1": "23:59:59"},
        "start_at",
        "between 1970-01-01",
    ),
    "rate limit of 0 a second": (
        {"rate_limit": "0/s"},
        "rate_limit",
        "Use <starts>/<period>",
    ),
    "rate limit per key without a key": (
        {"rate_limit_per_key": "5/m"},
        "rate_limit_per_key",
        "needs flow_key",
    ),
    "concurrency limit of 100,001": (
        {"concurrency_limit": "100001"},
        "concurrency_limit",
        "less than or equal to 100000",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_an_error_next_to_the_field_and_writes_nothing(
    operator: Client, case: str
) -> None:
    overrides, field, text = CASES[case]
    before = counts()
    response = operator.post(reverse("admin:tasks_app_task_add"), form(**overrides))
    assert response.status_code == 200, "the form was accepted"
    errors = response.context["adminform"].form.errors
    assert field in errors and any(text in m for m in errors[field]), errors
    assert counts() == before


def test_the_live_preview_answers_400_for_an_instant_out_of_range(operator: Client) -> None:
    response = operator.get(
        reverse("admin:tasks_app_task_preview"),
        {
            "schedule_type": "interval",
            "interval_seconds": "60",
            "end_at_0": "9999-12-31",
            "end_at_1": "23:59:59",
        },
    )
    assert response.status_code == 400
    assert "between 1970-01-01" in response.json()["errors"]["end_at"][0]["message"]
