"""A run's secrets through every way out (the REST API, the admin's run page, ``manage.py tasks
show --json``), whatever its task becomes; where a task's credential may go on a "run now
with"; header values that cannot be sent, refused when saved and never quoted in a run's
error."""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.models import Run, RunStatus, Task
from tasks_app.services.tokens import token_create
from tasks_app.worker import run_execution
from tests.api.conftest import user_with
from tests.stored_rows import run_set

pytestmark = pytest.mark.django_db

SECRET = "Bearer s3cr3t-webhook-credential"
URL = "https://hooks.example.com/orders"
PAYLOAD = {"url": URL, "headers": {"Authorization": SECRET, "X-Api-Key": "k3y-s3cr3t-value"}}


def _api(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user).token}")
    return client


def _staff(name: str, *codenames: str) -> Client:
    user = user_with(name, *codenames)
    user.is_staff = True
    user.save()
    browser = Client()
    browser.force_login(user)
    return browser


def _no_secret(text: str) -> None:
    assert "s3cr3t" not in text, text


def _every_way_out(run_id: str) -> list[str]:
    """The run as a viewer (no permission on the action) reads it: API, admin, CLI."""
    viewer = user_with("viewer", "view_task", "view_run")
    viewer.is_staff = True
    viewer.save()
    api = _api(viewer).get(f"/api/runs/{run_id}")
    assert api.status_code == 200, api.content
    browser = Client()
    browser.force_login(viewer)
    page = browser.get(reverse("admin:tasks_app_run_change", args=[run_id]))
    assert page.status_code == 200
    cli = io.StringIO()
    call_command("tasks", "show", run_id, "--json", "--as", "viewer", stdout=cli)
    text = io.StringIO()
    call_command("tasks", "show", run_id, "--as", "viewer", stdout=text)
    runs = _api(viewer).get("/api/runs").content.decode()
    return [api.content.decode(), page.content.decode(), cli.getvalue(), text.getvalue(), runs]


@pytest.fixture
def webhook() -> Task:
    return services.task_create(id="hook", action="http", payload=PAYLOAD)


# --- a run keeps the secrets of the action it was made with -------------------------------


def test_a_runs_secrets_stay_masked_after_its_task_changes_action(webhook: Task) -> None:
    operator = user_with(
        "operator", "view_task", "view_run", "change_task", "add_run", "use_action_http"
    )
    client = _api(operator)
    made = client.post(
        "/api/tasks/hook/execute", {"payload": {"url": URL, "headers": "set"}}, "json"
    )
    assert made.status_code == 202, made.content
    run_id = made.json()["id"]
    assert Run.objects.get(pk=run_id).payload["headers"] == PAYLOAD["headers"]  # sent as is
    changed = client.patch(
        "/api/tasks/hook", {"action": "echo", "payload": {"message": "hi"}}, "json"
    )
    assert changed.status_code == 200, changed.content
    for text in _every_way_out(run_id):
        _no_secret(text)
    shown = _api(operator).get(f"/api/runs/{run_id}").json()
    assert shown["payload"]["headers"] == "set" and shown["action"] == "http"


def test_a_later_attempt_keeps_the_action_its_payload_was_made_with(webhook: Task) -> None:
    run = services.task_execute(task=webhook, payload={"url": URL, "headers": "set"})
    Task.objects.filter(pk="hook").update(action="echo", payload={"message": "hi"})
    run_set(run.pk, status=RunStatus.FAILED, finished_at=timezone.now())
    again = services.run_retry(run=Run.objects.select_related("task").get(pk=run.pk))
    assert again.action == "http"
    for text in _every_way_out(str(again.pk)):
        _no_secret(text)


# --- a run now with the task's credential goes to the task's own URL only --------------------


ELSEWHERE = {
    "url": "https://hooks.example.com/admin/delete-everything?x=1",
    "method": "DELETE",
    "headers": "set",
}


def test_run_now_with_the_credential_to_another_path_needs_change_task(webhook: Task) -> None:
    runner = user_with("runner", "view_task", "add_run", "use_action_http")  # no change_task
    answer = _api(runner).post("/api/tasks/hook/execute", {"payload": ELSEWHERE}, "json")
    assert answer.status_code == 400, answer.content
    message = " ".join(answer.json()["detail"]["payload"])
    assert message.startswith("url: headers") and "tasks_app.change_task" in message
    assert not Run.objects.exists()

    # Another origin: refused just the same (not sent without the credential).
    other = {**ELSEWHERE, "url": "https://evil.example.net/orders"}
    answer = _api(runner).post("/api/tasks/hook/execute", {"payload": other}, "json")
    assert answer.status_code == 400 and not Run.objects.exists()

    # The query string may vary, and the runner's own headers may go anywhere.
    query = {"url": URL + "?attempt=2", "headers": "set"}
    answer = _api(runner).post("/api/tasks/hook/execute", {"payload": query}, "json")
    assert answer.status_code == 202, answer.content
    assert Run.objects.get().payload["headers"] == PAYLOAD["headers"]
    own = {**ELSEWHERE, "headers": {"Authorization": "Bearer mine"}}
    answer = _api(runner).post("/api/tasks/hook/execute", {"payload": own}, "json")
    assert answer.status_code == 202, answer.content

    # Who may change the task may send its credential to another path of its origin.
    editor = user_with("editor", "view_task", "add_run", "change_task", "use_action_http")
    answer = _api(editor).post("/api/tasks/hook/execute", {"payload": ELSEWHERE}, "json")
    assert answer.status_code == 202, answer.content
    assert Run.objects.get(pk=answer.json()["id"]).payload["headers"] == PAYLOAD["headers"]


def test_run_now_with_the_credential_elsewhere_is_refused_in_the_admin(webhook: Task) -> None:
    browser = _staff("runner", "view_task", "add_run", "use_action_http")
    answer = browser.post(
        reverse("admin:tasks_app_task_run_now", args=["hook"]),
        {"payload": json.dumps(ELSEWHERE)},
    )
    assert answer.status_code == 302
    shown = " ".join(str(m) for m in get_messages(answer.wsgi_request))
    assert "not run" in shown and "url: headers" in shown and "change_task" in shown, shown
    assert not Run.objects.exists()


def test_run_now_with_the_credential_elsewhere_is_refused_in_the_cli(webhook: Task) -> None:
    user_with("runner", "view_task", "add_run", "use_action_http")
    with pytest.raises(CommandError) as info:
        call_command(
            "tasks",
            "execute",
            "hook",
            "--as",
            "runner",
            "--payload",
            json.dumps(ELSEWHERE),
            stdout=io.StringIO(),
        )
    assert info.value.returncode == 1
    assert "payload: url: headers" in str(info.value) and "change_task" in str(info.value)
    assert not Run.objects.exists()


# --- a header value that cannot be sent ---------------------------------------------------

BROKEN = {"url": URL, "headers": {"Authorization": "Bearer s3cr3t-line\n"}}


def test_a_header_value_that_cannot_be_sent_is_refused_by_the_api() -> None:
    root = User.objects.create_superuser("root", "root@example.com", "pw-Root-2026")
    answer = _api(root).post(
        "/api/tasks", {"id": "hook", "action": "http", "payload": BROKEN}, "json"
    )
    assert answer.status_code == 400, answer.content
    assert "headers.Authorization: a header value cannot hold a line break" in str(answer.json())
    _no_secret(answer.content.decode())
    too_long = {"url": URL, "headers": {"Authorization": "s3cr3t" * 2000}}
    answer = _api(root).post(
        "/api/tasks", {"id": "hook", "action": "http", "payload": too_long}, "json"
    )
    assert answer.status_code == 400 and "headers.Authorization" in str(answer.json())
    _no_secret(answer.content.decode())
    assert not Task.objects.exists()


def test_a_header_value_that_cannot_be_sent_is_refused_by_the_admin_and_the_cli() -> None:
    from tests.shared import form

    browser = Client()
    browser.force_login(User.objects.create_superuser("root", "root@example.com", "pw-R-2026"))
    page = browser.post(
        reverse("admin:tasks_app_task_add"),
        form(id="hook", action="http", payload=json.dumps(BROKEN)),
    )
    assert page.status_code == 200  # the form again, with its error
    errors = page.context["adminform"].form.errors.as_json()
    assert "headers.Authorization: a header value cannot hold a line break" in errors
    _no_secret(errors)
    with pytest.raises(CommandError) as info:
        call_command(
            "tasks",
            "create",
            "hook",
            "--action",
            "http",
            "--payload",
            json.dumps(BROKEN),
            stdout=io.StringIO(),
        )
    assert info.value.returncode == 1 and "headers.Authorization" in str(info.value)
    _no_secret(str(info.value))
    assert not Task.objects.exists()


def test_a_secret_quoted_by_a_failing_run_is_masked_in_its_error(webhook: Task) -> None:
    # A value stored before the save-time check (or by another tool): the request fails.
    Task.objects.filter(pk="hook").update(payload=BROKEN)
    run = services.task_execute(task=Task.objects.get(pk="hook"))
    run_set(run.pk, status=RunStatus.QUEUED, queued_at=timezone.now())
    done = run_execution.run_execute(run_id=str(run.pk), worker="w1")
    assert done is not None and done.status == RunStatus.FAILED
    assert "Invalid header value" in done.error and "***" in done.error
    for text in _every_way_out(str(run.pk)):
        _no_secret(text)
