"""Each input rule is one sentence, whichever way in refuses it: the API's 400 body names the
field, the CLI prints one line and exits non-zero, the admin shows it next to the field (or,
for a button, in its message). Each test states the rule once and asks every entry point
that offers the field."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.models import Run, Task
from tasks_app.services.tokens import token_create
from tasks_app.worker import run_execution
from tests.shared import form, queued_run

pytestmark = pytest.mark.django_db

YEAR_AND_A_DAY = 366 * 86400
# TASKS_MAX_DELAY_SECONDS at its default (365 days), as every entry point words it.
MAX_DELAY = "must be at most 365 days (31,536,000 s), the TASKS_MAX_DELAY_SECONDS setting"
MAX_DELAY_AHEAD = (
    "must be at most 365 days (31,536,000 s) from now, the TASKS_MAX_DELAY_SECONDS setting"
)
NOTE_MAX = 2000
NOTE_TOO_LONG = "must be at most 2,000 characters"


@pytest.fixture
def superuser() -> Any:
    return get_user_model().objects.create_superuser("rules", "r@example.com", "pw-rules-123")


def api_error(superuser: Any, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """The ``detail`` of the 400 answer: ``{field: [message]}``."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=superuser).token}")
    response = getattr(client, method)(path, body, format="json")
    assert response.status_code == 400, response.content
    return response.json()["detail"]


def cli_error(*args: str) -> str:
    """The one line ``manage.py tasks`` ends with (its exit status is not 0)."""
    with pytest.raises(CommandError) as caught:
        call_command("tasks", *args, stdout=StringIO(), stderr=StringIO())
    assert caught.value.returncode != 0
    line = str(caught.value)
    assert "\n" not in line
    return line


def admin_errors(superuser: Any, **fields: str) -> dict[str, list[str]]:
    client = Client()
    client.force_login(superuser)
    response = client.post("/admin/tasks_app/task/add/", form(**fields))
    assert response.status_code == 200, "the form should be shown again with errors"
    return {k: list(v) for k, v in response.context["adminform"].form.errors.items()}


def admin_pause(superuser: Any, task: Task, note: str) -> list[str]:
    client = Client()
    client.force_login(superuser)
    response = client.post(f"/admin/tasks_app/task/{task.pk}/pause/", {"note": note}, follow=True)
    assert response.status_code == 200
    return [str(m) for m in response.context["messages"]]


def on_demand_task() -> Task:
    return services.task_create(id="rules", action="noop")


# -- the maximum delay ------------------------------------------------------------------------


ENTRY_POINTS = ("api", "cli", "admin")


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_delay_longer_than_the_maximum_is_worded_once(entry: str, superuser: Any) -> None:
    delay = YEAR_AND_A_DAY
    if entry == "api":
        on_demand_task()
        detail = api_error(superuser, "post", "/api/tasks/rules/schedule", {"delay_seconds": delay})
        assert detail == {"delay_seconds": [MAX_DELAY]}
    elif entry == "cli":
        on_demand_task()
        assert cli_error("schedule", "rules", "--in", f"{delay}s").endswith(
            f"delay_seconds: {MAX_DELAY}"
        )
    else:
        assert admin_errors(superuser, delay_seconds=str(delay))["delay_seconds"] == [MAX_DELAY]
    assert Run.objects.count() == 0


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_an_interval_longer_than_the_maximum_delay_is_worded_as_a_delay(
    entry: str, superuser: Any
) -> None:
    interval = 365 * 86400 + 1  # within the field's own bound (366 days), above the setting
    if entry == "api":
        body = {"id": "rules", "action": "noop", "schedule_type": "interval"}
        detail = api_error(superuser, "post", "/api/tasks", {**body, "interval_seconds": interval})
        assert detail == {"interval_seconds": [MAX_DELAY]}
    elif entry == "cli":
        line = cli_error("create", "rules", "--action", "noop", "--every", str(interval))
        assert line.endswith(f"interval_seconds: {MAX_DELAY}")
    else:
        errors = admin_errors(superuser, schedule_type="interval", interval_seconds=str(interval))
        assert errors["interval_seconds"] == [MAX_DELAY]
    assert not Task.objects.exists()


def test_the_schedule_call_words_the_interval_bound_as_the_task_does(superuser: Any) -> None:
    on_demand_task()
    body = {"schedule_type": "interval", "interval_seconds": 365 * 86400 + 1}
    assert api_error(superuser, "post", "/api/tasks/rules/schedule", body) == {
        "interval_seconds": [MAX_DELAY]
    }


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_run_at_further_ahead_than_the_maximum_delay_is_worded_once(
    entry: str, superuser: Any
) -> None:
    at = (timezone.now() + timedelta(days=400)).replace(microsecond=0)
    if entry == "api":
        body = {"id": "rules", "action": "noop", "schedule_type": "once", "run_at": at.isoformat()}
        assert api_error(superuser, "post", "/api/tasks", body) == {"run_at": [MAX_DELAY_AHEAD]}
    elif entry == "cli":
        on_demand_task()
        line = cli_error("schedule", "rules", "--at", at.isoformat())
        assert line.endswith(f"run_at: {MAX_DELAY_AHEAD}")
    else:
        local = timezone.localtime(at)
        errors = admin_errors(
            superuser,
            schedule_type="once",
            run_at_0=local.strftime("%Y-%m-%d"),
            run_at_1=local.strftime("%H:%M:%S"),
        )
        assert errors["run_at"] == [MAX_DELAY_AHEAD]
    assert Run.objects.count() == 0


@pytest.mark.parametrize("entry", ("api", "cli"))  # the admin asks for no expiry
def test_an_expiry_longer_than_the_maximum_delay_is_worded_once(entry: str, superuser: Any) -> None:
    on_demand_task()
    if entry == "api":
        body = {"delay_seconds": 60, "expires_in_seconds": YEAR_AND_A_DAY}
        detail = api_error(superuser, "post", "/api/tasks/rules/schedule", body)
        assert detail == {"expires_in_seconds": [MAX_DELAY]}
    else:
        line = cli_error("schedule", "rules", "--in", "60s", "--expires-in", "366d")
        assert line.endswith(f"expires_in_seconds: {MAX_DELAY}")
    assert Run.objects.count() == 0


def test_the_bound_follows_the_setting_in_its_own_words(settings: Any) -> None:
    """A deployment's own maximum is worded the same way (in the services, which read the
    setting at each call)."""
    settings.TASKS_MAX_DELAY_SECONDS = 90
    task = on_demand_task()
    with pytest.raises(ValidationError) as caught:
        services.task_schedule_once(task=task, delay_seconds=91)
    assert caught.value.message_dict == {
        "delay_seconds": ["must be at most 90 s, the TASKS_MAX_DELAY_SECONDS setting"]
    }
    settings.TASKS_MAX_DELAY_SECONDS = 86400
    with pytest.raises(ValidationError) as caught:
        services.task_schedule_once(task=task, delay_seconds=86401)
    assert caught.value.message_dict["delay_seconds"] == [
        "must be at most 1 day (86,400 s), the TASKS_MAX_DELAY_SECONDS setting"
    ]


# -- the pause note ---------------------------------------------------------------------------


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_pause_note_is_optional_everywhere(entry: str, superuser: Any) -> None:
    task = on_demand_task()
    if entry == "api":
        client = APIClient()
        client.force_authenticate(superuser)
        assert client.post("/api/tasks/rules/pause", {}, format="json").status_code == 200
    elif entry == "cli":
        call_command("tasks", "pause", "rules", stdout=StringIO())
    else:
        assert admin_pause(superuser, task, "") == ["Task rules paused."]
    task.refresh_from_db()
    assert task.paused and task.state.pause_note == ""


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_pause_note_longer_than_the_maximum_is_worded_once(entry: str, superuser: Any) -> None:
    task = on_demand_task()
    note = "n" * (NOTE_MAX + 1)
    if entry == "api":
        detail = api_error(superuser, "post", "/api/tasks/rules/pause", {"note": note})
        assert detail == {"note": [NOTE_TOO_LONG]}
    elif entry == "cli":
        assert cli_error("pause", "rules", "--note", note).endswith(f"note: {NOTE_TOO_LONG}")
    else:
        assert admin_pause(superuser, task, note) == [
            f"Task rules not paused: note: {NOTE_TOO_LONG}"
        ]
    task.refresh_from_db()
    assert not task.paused


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_pause_note_of_the_maximum_length_is_kept_whole(entry: str, superuser: Any) -> None:
    """2,000 characters are taken as they are by each way in (the admin's input once
    stopped at 500)."""
    task = on_demand_task()
    note = "m" * NOTE_MAX
    if entry == "api":
        client = APIClient()
        client.force_authenticate(superuser)
        response = client.post("/api/tasks/rules/pause", {"note": note}, format="json")
        assert response.status_code == 200
    elif entry == "cli":
        call_command("tasks", "pause", "rules", "--note", note, stdout=StringIO())
    else:
        page = Client()
        page.force_login(superuser)
        html = page.get(f"/admin/tasks_app/task/{task.pk}/change/").content.decode()
        assert '<input type="text" name="note" id="pause-note" maxlength="2000" ' in html
        assert admin_pause(superuser, task, note) == [f"Task rules paused: {note}"]
    task.refresh_from_db()
    assert task.paused and task.state.pause_note == note


def test_auto_pause_shortens_its_note_to_the_same_maximum() -> None:
    """The engine's own note (after ``pause_after_failures``) follows the rule a person's
    does: cut to the maximum with a visible ellipsis, not silently at another length."""
    reason = "x" * 3000
    task = services.task_create(
        id="rules-auto", action="fail", payload={"message": reason}, pause_after_failures=1
    )
    run_execution.run_execute(run_id=str(queued_run(task).id), worker="w")
    task.refresh_from_db()
    assert task.paused
    assert len(task.state.pause_note) == NOTE_MAX
    assert task.state.pause_note.startswith("auto-paused after 1 consecutive failures; last: ")
    assert task.state.pause_note.endswith("x\u2026")


# -- instants and schedules -------------------------------------------------------------------


@pytest.mark.parametrize("entry", ("api", "cli"))  # the admin's date fields are in its zone
def test_an_instant_without_an_offset_is_worded_once(entry: str, superuser: Any) -> None:
    on_demand_task()
    naive = (timezone.now() + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S")
    rule = "must include a time-zone offset (e.g. 'Z' or '+02:00')"
    if entry == "api":
        detail = api_error(superuser, "post", "/api/tasks/rules/schedule", {"run_at": naive})
        assert detail == {"run_at": [rule]}
    else:
        assert cli_error("schedule", "rules", "--at", naive).endswith(f"{naive!r} {rule}")
    assert Run.objects.count() == 0


REQUIRED: dict[str, tuple[dict[str, str], str, str]] = {
    "cron": ({"schedule_type": "cron"}, "cron", "is required for a 'cron' schedule"),
    "interval": (
        {"schedule_type": "interval"},
        "interval_seconds",
        "is required for an 'interval' schedule",
    ),
    "once": ({"schedule_type": "once"}, "run_at", "is required for a 'once' schedule"),
}


def admin_preview_error(superuser: Any, fields: dict[str, str]) -> dict[str, list[str]]:
    client = Client()
    client.force_login(superuser)
    response = client.get("/admin/tasks_app/task/preview/", fields)
    assert response.status_code == 400
    return {k: [e["message"] for e in v] for k, v in response.json()["errors"].items()}


# The CLI's options name the kind and its field together (--every, --cron, --at); the
# admin's live preview of a 'once' schedule without its instant is empty, not an error.
NEEDS = [
    (kind, entry)
    for kind in REQUIRED
    for entry in ("api", "admin", "admin preview")
    if (kind, entry) != ("once", "admin preview")
]


@pytest.mark.parametrize(("kind", "entry"), NEEDS)
def test_the_field_a_schedule_needs_is_worded_once(kind: str, entry: str, superuser: Any) -> None:
    fields, field, rule = REQUIRED[kind]
    if entry == "api":
        body = {"id": "rules", "action": "noop", **fields}
        assert api_error(superuser, "post", "/api/tasks", body) == {field: [rule]}
    elif entry == "admin":
        assert admin_errors(superuser, **fields)[field] == [rule]
    else:
        assert admin_preview_error(superuser, fields) == {field: [rule]}
    assert not Task.objects.exists()


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_an_interval_below_one_second_is_worded_once(entry: str, superuser: Any) -> None:
    """The CLI once refused ``--every 0s`` in words of its own."""
    rule = "Ensure this value is greater than or equal to 1."
    if entry == "api":
        body = {"id": "rules", "action": "noop", "schedule_type": "interval"}
        detail = api_error(superuser, "post", "/api/tasks", {**body, "interval_seconds": 0})
        assert detail == {"interval_seconds": [rule]}
    elif entry == "cli":
        line = cli_error("create", "rules", "--action", "noop", "--every", "0s")
        assert line.endswith(f"interval_seconds: {rule}")
    else:
        errors = admin_errors(superuser, schedule_type="interval", interval_seconds="0")
        assert errors["interval_seconds"] == [rule]
    assert not Task.objects.exists()


@pytest.mark.parametrize(
    "call", ("create", "schedule")
)  # the CLI's --in and --at exclude each other
def test_a_delay_and_an_instant_together_are_worded_once(call: str, superuser: Any) -> None:
    at = (timezone.now() + timedelta(hours=1)).isoformat()
    both = {"delay_seconds": 60, "run_at": at}
    if call == "create":
        detail = api_error(
            superuser, "post", "/api/tasks", {"id": "rules", "action": "noop", **both}
        )
    else:
        on_demand_task()
        detail = api_error(superuser, "post", "/api/tasks/rules/schedule", both)
    assert detail == {"delay_seconds": ["give either delay_seconds or run_at, not both"]}
    assert Run.objects.count() == 0


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_text_longer_than_its_field_is_worded_once(entry: str, superuser: Any) -> None:
    """The API once had a sentence of its own ("Ensure this field has no more than ...")."""
    name = "n" * 201
    rule = "Ensure this value has at most 200 characters (it has 201)."
    if entry == "api":
        body = {"id": "rules", "action": "noop", "name": name}
        assert api_error(superuser, "post", "/api/tasks", body) == {"name": [rule]}
    elif entry == "cli":
        line = cli_error("create", "rules", "--action", "noop", "--name", name)
        assert line.endswith(f"name: {rule}")
    else:
        assert admin_errors(superuser, name=name)["name"] == [rule]
    assert not Task.objects.exists()


def test_the_schedule_call_words_a_too_long_cron_as_the_task_does(superuser: Any) -> None:
    on_demand_task()
    body = {"schedule_type": "cron", "cron": "*" * 201}
    assert api_error(superuser, "post", "/api/tasks/rules/schedule", body) == {
        "cron": ["Ensure this value has at most 200 characters (it has 201)."]
    }


@pytest.mark.parametrize("entry", ("api", "cli"))  # the admin previews a fixed five fires
@pytest.mark.parametrize("count", ("0", "101"))
def test_a_preview_count_out_of_range_is_worded_once(
    entry: str, count: str, superuser: Any
) -> None:
    services.task_create(id="rules", action="noop", schedule_type="interval", interval_seconds=60)
    rule = "must be between 1 and 100"
    if entry == "api":
        client = APIClient()
        client.force_authenticate(superuser)
        response = client.get(f"/api/tasks/rules/preview?count={count}")
        assert response.status_code == 400
        assert response.json()["detail"] == {"count": [rule]}
    else:
        assert cli_error("preview", "rules", "--count", count).endswith(f"--count: {rule}")
