"""The task page: schedule in words, next five fires, preview endpoint, buttons, errors."""

from __future__ import annotations

import re
from datetime import datetime

import pytest
from django.conf import settings
from django.urls import reverse

from tasks_app import services
from tasks_app.models import Run, RunStatus, Task, TaskAuditEntry, TaskStatus, Trigger
from tasks_app.schedules.sync import schedules_sync
from tests.django_tasks import functions
from tests.shared import form as task_form
from tests.stored_rows import run_set

pytestmark = pytest.mark.django_db


def change_url(task: Task) -> str:
    return reverse("admin:tasks_app_task_change", args=[task.pk])


def test_preview_endpoint_spells_out_cron_and_lists_five_local_fires(operator) -> None:
    response = operator.get(
        reverse("admin:tasks_app_task_preview"),
        {"schedule_type": "cron", "cron": "0 9 * * 1-5", "timezone": "Europe/Paris"},
    )
    assert response.status_code == 200
    data = response.json()
    assert data["description"] == "At 09:00 AM, Monday through Friday (Europe/Paris)"
    assert len(data["fires"]) == 5
    for fire in data["fires"]:
        local = datetime.fromisoformat(fire["local"])
        assert (local.hour, local.minute) == (9, 0) and local.isoweekday() <= 5
        assert datetime.fromisoformat(fire["utc"]) == local  # same instant, other zone
    assert [f["utc"] for f in data["fires"]] == sorted(f["utc"] for f in data["fires"])


def test_preview_endpoint_reports_a_malformed_cron_and_an_unknown_zone(operator) -> None:
    url = reverse("admin:tasks_app_task_preview")
    bad_cron = operator.get(url, {"schedule_type": "cron", "cron": "61 * * * *", "timezone": "UTC"})
    assert bad_cron.status_code == 400
    assert "invalid cron expression" in bad_cron.json()["errors"]["cron"][0]["message"]
    bad_zone = operator.get(
        url, {"schedule_type": "cron", "cron": "* * * * *", "timezone": "Mars/Olympus"}
    )
    assert bad_zone.status_code == 400 and "timezone" in bad_zone.json()["errors"]


def test_preview_endpoint_needs_a_staff_login(client) -> None:
    response = client.get(reverse("admin:tasks_app_task_preview"), {"schedule_type": "none"})
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_task_page_shows_words_next_fires_status_and_last_runs(operator) -> None:
    task = services.task_create(
        id="nightly",
        action="noop",
        schedule_type="cron",
        cron="30 2 * * *",
        timezone="America/New_York",
    )
    run = services.task_execute(task=task)
    run_set(run.pk, status=RunStatus.FAILED, error="boom")
    page = operator.get(change_url(task)).content.decode()
    assert "At 02:30 AM (America/New_York)" in page
    fires = re.findall(r"<li><span class='tasks-mono'>([^<]+)</span>", page)
    assert len(fires) == 5 and all("02:30:00" in f for f in fires)
    task.refresh_from_db()
    assert f"{task.state.next_run_at:%Y-%m-%d %H:%M:%S} UTC" in page  # next run, in the state bar
    assert 'class="tasks-badge tasks-pending"' in page
    assert str(run.pk)[:8] in page and "tasks-badge tasks-failed" in page  # last runs inline
    for button in ("btn-run-now", "btn-pause", "btn-duplicate"):
        assert f'id="{button}"' in page


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("cron", "every day", "invalid cron expression"),
        ("timezone", "Mars/Olympus", "Mars/Olympus"),
        ("action", "launch-rockets", "unknown action"),
        ("delay_seconds", "-5", "must not be negative"),
        ("payload", '{"seconds": "soon"}', "does not fit action"),
    ],
)
def test_add_form_shows_service_errors_next_to_the_field(operator, field, value, message) -> None:
    data = {
        "id": "bad-one",
        "action": "sleep",
        "payload": '{"seconds": 1}',
        "queue": settings.CELERY_TASK_DEFAULT_QUEUE,
        "priority": 5,
        "max_retries": 0,
        "retry_backoff_seconds": 10,
        "schedule_type": "cron",
        "cron": "*/5 * * * *",
        "timezone": "UTC",
        "jitter_seconds": 0,
        "overlap_policy": "allow",
        "catchup": "skip",
        "catchup_window_seconds": 3600,
    }
    data[field] = value
    response = operator.post(reverse("admin:tasks_app_task_add"), data)
    assert response.status_code == 200, "the form was accepted"
    errors = response.context["adminform"].form.errors
    assert field in errors and message in " ".join(errors[field])
    assert not Task.objects.filter(pk="bad-one").exists()


def test_run_now_button_creates_an_admin_run_and_says_its_status(operator) -> None:
    task = services.task_create(id="button-run", action="noop")
    response = operator.post(reverse("admin:tasks_app_task_run_now", args=[task.pk]))
    assert response.status_code == 302 and response["Location"] == change_url(task)
    run = Run.objects.get(task=task)
    assert run.trigger == Trigger.ADMIN
    page = operator.get(change_url(task)).content.decode()
    # The test's transaction never commits, so the run is not published: it is pending,
    # and the message says so rather than "started".
    assert f"is {run.status}" in page and "started" not in page.split("messagelist")[1][:400]


def test_run_now_with_a_payload_runs_it_and_a_bad_one_says_why(operator) -> None:
    task = services.task_create(id="hello", action="echo", payload={"message": "hi"})
    page = operator.get(change_url(task)).content.decode()
    assert 'id="btn-run-with"' in page and "{&quot;message&quot;: &quot;hi&quot;}" in page
    url = reverse("admin:tasks_app_task_run_now", args=[task.pk])
    response = operator.post(url, {"payload": '{"message": "once"}'})
    assert response.status_code == 302
    assert Run.objects.get(task=task).payload == {"message": "once"}
    for bad, said in (("{", "payload: not valid JSON"), ('{"x": 1}', "does not fit action")):
        operator.post(url, {"payload": bad})
        assert said in operator.get(change_url(task)).content.decode()
    assert Run.objects.filter(task=task).count() == 1


def test_payload_check_runs_the_save_time_validation(operator) -> None:
    url = reverse("admin:tasks_app_task_payload_check")

    def check(action: str, payload: str) -> dict:
        response = operator.post(url, {"action": action, "payload": payload})
        assert response.status_code == 200
        return response.json()

    assert check("http", '{"url": "https://hooks.example.com/x"}') == {"ok": True, "errors": []}
    refused = check("http", '{"url": "ftp://files.example.com/x"}')
    assert not refused["ok"] and refused["errors"][0].startswith("does not fit action 'http': url")
    missing = check("email", '{"to": "ops@example.com"}')
    assert any("subject" in e for e in missing["errors"]), missing
    assert check("echo", '{"message": ')["errors"][0].startswith("not valid JSON")
    unknown = check("launch-rocket", "{}")
    assert "unknown action 'launch-rocket'" in unknown["errors"][0]
    assert operator.get(url).status_code == 405


def test_payload_check_needs_a_staff_login(client) -> None:
    response = client.post(reverse("admin:tasks_app_task_payload_check"), {"action": "noop"})
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_task_form_offers_actions_with_descriptions_and_their_schemas(operator) -> None:
    response = operator.get(reverse("admin:tasks_app_task_add"))
    page = response.content.decode()
    assert '<option value="http">http — Sends an HTTP request' in page
    schemas = response.context["action_schemas"]
    assert schemas["email"]["schema"]["required"] == ["to", "subject", "body"]
    assert 'id="tasks-action-schemas"' in page and "payload_form.js" in page


def test_preview_errors_are_plain_text_not_html_entities(operator) -> None:
    response = operator.get(
        reverse("admin:tasks_app_task_preview"),
        {"schedule_type": "interval", "timezone": "UTC"},
    )
    message = response.json()["errors"]["interval_seconds"][0]["message"]
    assert message == "is required for an 'interval' schedule"  # not &#x27;interval&#x27;


def test_next_run_is_truthful_after_a_missed_fire_when_paused_and_on_demand(operator) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from tasks_app.admin.views import next_run_state

    now = timezone.now()
    task = services.task_create(
        id="every-minute", action="noop", schedule_type="interval", interval_seconds=60
    )
    missed = now - timedelta(seconds=30)
    task.state.next_run_at = missed
    text = str(next_run_state(task, now=now))
    assert f"{missed:%Y-%m-%d %H:%M:%S} UTC" in text and "was missed" in text
    assert 'catch-up "skip" skips it' in text
    upcoming = re.findall(r">(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) UTC<", text)[0]
    assert datetime.fromisoformat(upcoming + "+00:00") > now  # what is shown first is ahead
    task.state.status = TaskStatus.PAUSED  # its state row as a pause leaves it (not saved)
    assert next_run_state(task, now=now) == "none while paused (resume to continue)"
    on_demand = services.task_create(id="by-hand", action="noop")
    assert next_run_state(on_demand, now=now) == "none waiting"
    page = operator.get(change_url(on_demand)).content.decode()
    assert "no fires: runs only when asked" in page and "no upcoming fire" not in page


def test_pause_button_records_who_and_why(operator) -> None:
    task = services.task_create(
        id="pausy", action="noop", schedule_type="interval", interval_seconds=60
    )
    url = reverse("admin:tasks_app_task_pause", args=[task.pk])
    operator.post(url, {"note": "vendor API down until 15:00"})
    task.refresh_from_db()
    assert task.paused and task.state.status == TaskStatus.PAUSED
    assert (task.state.pause_note, task.state.paused_by) == ("vendor API down until 15:00", "ops")
    page = operator.get(change_url(task)).content.decode()
    assert "vendor API down until 15:00" in page and 'id="btn-resume"' in page
    operator.post(reverse("admin:tasks_app_task_resume", args=[task.pk]))
    task.refresh_from_db()
    assert not task.paused and task.state.status == TaskStatus.PENDING
    assert list(
        TaskAuditEntry.objects.filter(task_id=task.pk).values_list("event", flat=True)[:2]
    ) == ["resumed", "paused"]


def test_buttons_refuse_get(operator) -> None:
    task = services.task_create(id="no-get", action="noop")
    response = operator.get(reverse("admin:tasks_app_task_run_now", args=[task.pk]))
    assert response.status_code == 405 and not Run.objects.exists()


def test_duplicate_copies_the_task_and_holds_a_recurring_copy_paused(operator) -> None:
    task = services.task_create(
        id="report",
        name="Report",
        action="echo",
        payload={"message": "hi"},
        schedule_type="cron",
        cron="0 * * * *",
        timezone="Asia/Tokyo",
        max_retries=3,
    )
    response = operator.post(reverse("admin:tasks_app_task_duplicate", args=[task.pk]))
    copy = Task.objects.get(pk="report-copy")
    assert response["Location"] == change_url(copy)
    assert (copy.action, copy.payload, copy.cron, copy.timezone, copy.max_retries) == (
        "echo",
        {"message": "hi"},
        "0 * * * *",
        "Asia/Tokyo",
        3,
    )
    assert copy.name == "Report (copy)"
    assert copy.paused and "Duplicate of report" in copy.state.pause_note
    operator.post(reverse("admin:tasks_app_task_duplicate", args=[task.pk]))
    assert Task.objects.filter(pk="report-copy-2").exists()


def test_a_functions_task_saves_from_its_page_or_says_why(operator, settings) -> None:
    """The task of a @task function, made by its first enqueue, in a project that lets
    people choose no function (``TASKS_DJANGO_TASKS`` empty): its page saves a new
    description and retries, and a refused value is an error on the form, never a 500."""
    settings.TASKS_DJANGO_TASKS = []
    functions.add.enqueue(1, 2)
    task = Task.objects.get(pk="tests.django_tasks.functions.add")
    url = change_url(task)
    assert operator.get(url).status_code == 200
    fields = task_form(
        id=task.pk,
        name=task.name,
        action="django_task",
        payload='{"task": "tests.django_tasks.functions.add"}',
        description="Adds two numbers.",
        max_retries="3",
    )
    saved = operator.post(url, fields)
    assert saved.status_code == 302, saved.context["adminform"].form.errors
    task.refresh_from_db()
    assert (task.description, task.max_retries) == ("Adds two numbers.", 3)
    refused = operator.post(url, {**fields, "max_retries": "-1"})
    assert refused.status_code == 200
    assert "max_retries" in refused.context["adminform"].form.errors


def test_a_declared_functions_task_page_answers_a_post(operator, settings) -> None:
    """Declared in code (``function_policy``), its definition is read-only on the page: a
    POST says nothing was changed instead of answering 500."""
    settings.TASKS_DJANGO_TASKS = []
    schedules_sync("tests.django_tasks.schedules")
    task = Task.objects.get(pk="tests.django_tasks.functions.flaky")
    response = operator.post(change_url(task), {"description": "changed here"}, follow=True)
    assert response.status_code == 200
    assert "Nothing was changed: task" in response.content.decode()
    task.refresh_from_db()
    assert task.description != "changed here"
