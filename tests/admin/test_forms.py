"""The admin task page refuses bad input with an error next to the field, writes nothing,
and its actions go through the services."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tasks_app.models import Run, Task, TaskStatus, Trigger
from tests.shared import form

pytestmark = pytest.mark.django_db

ADD_URL = "/admin/tasks_app/task/add/"


@pytest.fixture
def admin_client() -> Client:
    user = get_user_model().objects.create_superuser("root-admin", "a@example.com", "pw-123456789")
    client = Client()
    client.force_login(user)
    return client


def field_errors(client: Client, **overrides: str) -> dict[str, list[str]]:
    response = client.post(ADD_URL, form(**overrides))
    assert response.status_code == 200, "the form should be shown again with errors"
    errors = response.context["adminform"].form.errors
    assert Task.objects.count() == 0 and Run.objects.count() == 0
    return {name: list(messages) for name, messages in errors.items()}


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"action": "launch-rocket"}, "action", "unknown action 'launch-rocket'"),
        ({"schedule_type": "cron", "cron": "0 25 * * *"}, "cron", "hour: 25 is outside 0-23"),
        (
            {"schedule_type": "cron", "cron": "0 9 * * *", "timezone": "Nowhere/City"},
            "timezone",
            "unknown time zone",
        ),
        ({"delay_seconds": "-5"}, "delay_seconds", "must not be negative"),
        ({"delay_seconds": str(400 * 86400)}, "delay_seconds", "at most 365 days"),
        ({"payload": '{"text": "no message"}'}, "payload", "'message' is a required property"),
    ],
)
def test_bad_input_is_shown_next_to_the_field(
    admin_client: Client, overrides: dict[str, str], field: str, message: str
) -> None:
    errors = field_errors(admin_client, **overrides)
    assert any(message in m for m in errors.get(field, [])), errors


def test_saving_a_task_with_a_delay_schedules_one_run(admin_client: Client) -> None:
    response = admin_client.post(ADD_URL, form(delay_seconds="120"))
    assert response.status_code == 302
    task = Task.objects.get(pk="reminder-001")
    run = task.runs.get()
    assert (run.trigger, run.status) == (Trigger.DELAY, "pending")
    assert task.state.status == TaskStatus.PENDING and task.state.next_run_at == run.due_at


def test_cron_task_saved_from_the_admin_owns_its_beat_entry(admin_client: Client) -> None:
    response = admin_client.post(
        ADD_URL, form(schedule_type="cron", cron="*/5 * * * *", timezone="America/New_York")
    )
    assert response.status_code == 302
    task = Task.objects.get(pk="reminder-001")
    assert task.state.next_run_at is not None and task.periodic_task is not None
    assert task.periodic_task.enabled


def test_run_now_pause_and_resume_actions(admin_client: Client) -> None:
    admin_client.post(ADD_URL, form(schedule_type="interval", interval_seconds="60"))
    changelist = "/admin/tasks_app/task/"
    admin_client.post(changelist, {"action": "run_now", "_selected_action": ["reminder-001"]})
    run = Run.objects.get(task_id="reminder-001")
    assert run.trigger == Trigger.ADMIN

    admin_client.post(changelist, {"action": "pause", "_selected_action": ["reminder-001"]})
    task = Task.objects.get(pk="reminder-001")
    assert task.paused and task.state.status == TaskStatus.PAUSED
    assert task.state.paused_by == "root-admin"
    assert task.periodic_task is not None and not task.periodic_task.enabled

    admin_client.post(changelist, {"action": "resume", "_selected_action": ["reminder-001"]})
    task.refresh_from_db()
    assert not task.paused and task.state.status == TaskStatus.PENDING


def test_run_page_shows_output_and_error(admin_client: Client) -> None:
    admin_client.post(ADD_URL, form())
    run = Run.objects.create(
        task_id="reminder-001",
        trigger="manual",
        status="failed",
        scheduled_for="2026-01-01T00:00:00Z",
        due_at="2026-01-01T00:00:00Z",
        output="partial <output>",
        error="ValueError: boom\nTraceback ...",
    )
    page = admin_client.get(f"/admin/tasks_app/run/{run.pk}/change/").content.decode()
    assert "partial &lt;output&gt;" in page and "ValueError: boom" in page


def test_task_page_shows_the_audit_trail_of_schedule_changes(admin_client: Client) -> None:
    admin_client.post(ADD_URL, form(schedule_type="interval", interval_seconds="60"))
    task = Task.objects.get(pk="reminder-001")
    from tasks_app import services

    services.task_update(task=task, data={"interval_seconds": 300}, by="alice")
    services.task_pause(task=task, note="vendor outage", by="bob")
    page = admin_client.get(f"/admin/tasks_app/task/{task.pk}/change/").content.decode()
    assert "alice" in page and "interval_seconds: 60 → 300" in page
    assert "bob" in page and "vendor outage" in page
