"""A write-only payload field is bound to where it is sent: an edit that moves the ``http``
action's URL to another origin (scheme, host, port) without sending the headers again
clears them, through the API, the admin and the CLI alike. The canary is a real local HTTP
server: after the edit, the run's request reaches it without the credential."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from tasks_app import actions, services
from tasks_app.actions import base
from tasks_app.models import RunStatus, Task
from tasks_app.vocabulary import secret_fields
from tests.actions.conftest import LOOPBACK_ONLY, Listener
from tests.actions.helpers import execute_in_process
from tests.shared import form

pytestmark = pytest.mark.django_db

SECRET = "Bearer canary-credential-7f3a"


@pytest.fixture(autouse=True)
def _loopback(settings: Any) -> None:
    settings.TASKS_HTTP_ALLOWED_NETWORKS = [LOOPBACK_ONLY]


@pytest.fixture
def operator() -> User:
    """Changes tasks and may use the http action; not a superuser, no run permission."""
    user = User.objects.create_user("operator", password=None, is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="tasks_app",
            codename__in=["view_task", "add_task", "change_task", "use_action_http"],
        )
    )
    return User.objects.get(pk=user.pk)


@pytest.fixture
def webhook(listener: Listener) -> Task:
    return services.task_create(
        id="hook",
        action="http",
        payload={"url": listener.url("/hook"), "headers": {"Authorization": SECRET}},
    )


def elsewhere(listener: Listener) -> str:
    """The same listener under another origin: ``localhost`` is not ``127.0.0.1``."""
    return f"http://localhost:{listener.port}/hook"


def delivered(listener: Listener, task_id: str) -> dict[str, str]:
    """Run the task through the real run service; the headers the listener received."""
    run = execute_in_process(services.task_execute(task=Task.objects.get(pk=task_id)))
    assert run.status == RunStatus.COMPLETED, run.error
    return listener.requests[-1].headers


def by_api(user: User, url: str) -> None:
    client = APIClient()
    client.force_authenticate(user)
    shown = client.get("/api/tasks/hook").json()["payload"]
    assert shown["headers"] == "set"  # what a client reads back and writes back
    answer = client.patch("/api/tasks/hook", {"payload": {**shown, "url": url}}, format="json")
    assert answer.status_code == 200, answer.content


def by_admin(user: User, url: str) -> None:
    client = Client()
    client.force_login(user)
    page = client.get(reverse("admin:tasks_app_task_change", args=["hook"]))
    shown = json.loads(page.context["adminform"].form["payload"].value())
    assert shown["headers"] == "set"
    answer = client.post(
        reverse("admin:tasks_app_task_change", args=["hook"]),
        form(id="hook", action="http", payload=json.dumps({**shown, "url": url})),
    )
    assert answer.status_code == 302, answer.context["adminform"].form.errors


def by_cli(user: User, url: str) -> None:
    payload = json.dumps({"url": url, "headers": "set"})
    call_command(
        "tasks", "update", "hook", "--payload", payload, "--as", user.username, stdout=StringIO()
    )


EDITS = {"api": by_api, "admin": by_admin, "cli": by_cli}


@pytest.mark.parametrize("way", list(EDITS))
def test_a_url_moved_to_another_origin_sends_no_secret(
    way: str, listener: Listener, webhook: Task, operator: User
) -> None:
    assert delivered(listener, "hook").get("Authorization") == SECRET  # the canary hears it
    EDITS[way](operator, elsewhere(listener))
    headers = delivered(listener, "hook")
    assert headers["Host"] == f"localhost:{listener.port}"  # the edit took
    assert "Authorization" not in headers
    assert all(SECRET not in value for value in headers.values())
    assert "headers" not in Task.objects.get(pk="hook").payload  # cleared, not kept aside


@pytest.mark.parametrize("way", list(EDITS))
def test_a_new_path_on_the_same_origin_keeps_the_secret(
    way: str, listener: Listener, webhook: Task, operator: User
) -> None:
    EDITS[way](operator, listener.url("/other-path"))
    headers = delivered(listener, "hook")
    assert listener.requests[-1].path == "/other-path"
    assert headers.get("Authorization") == SECRET


def test_the_secret_sent_again_with_the_new_url_is_used(
    listener: Listener, webhook: Task, operator: User
) -> None:
    new = {"url": elsewhere(listener), "headers": {"Authorization": "Bearer for-localhost"}}
    services.task_update(task=webhook, data={"payload": new}, by=operator)
    assert delivered(listener, "hook").get("Authorization") == "Bearer for-localhost"


@pytest.mark.parametrize(
    ("old", "new", "kept"),
    [
        ("https://a.example/x", "https://a.example:443/y", True),  # the default port spelled out
        ("https://a.example/x", "https://A.EXAMPLE/x", True),  # host names ignore case
        ("https://a.example/x", "http://a.example/x", False),  # scheme
        ("https://a.example/x", "https://b.example/x", False),  # host
        ("https://a.example/x", "https://a.example:8443/x", False),  # port
        ("https://a.example/x", "https://a.example.evil.test/x", False),
    ],
)
def test_the_origin_is_scheme_host_and_port(old: str, new: str, kept: bool) -> None:
    merged = secret_fields.payload_merged(
        "http",
        {"url": new, "headers": "set"},
        stored_action="http",
        stored={"url": old, "headers": {"Authorization": SECRET}},
    )
    assert ("headers" in merged) is kept
    if kept:
        assert merged["headers"] == {"Authorization": SECRET}


def test_a_required_secret_left_behind_is_a_400_naming_it(monkeypatch: Any) -> None:
    """An action whose secret is required: the edit is refused, naming the field."""

    def deliver(payload: dict[str, Any], ctx: actions.RunContext) -> None:
        return None

    schema = {
        "type": "object",
        "properties": {
            "url": {"type": "string"},
            "token": {"type": "string", "writeOnly": True},
        },
        "required": ["url", "token"],
        "additionalProperties": False,
    }
    monkeypatch.setitem(
        base._REGISTRY,
        "bound_secret",
        base.Action(
            name="bound_secret",
            func=deliver,
            schema=schema,
            validator=base.Draft202012Validator(schema),
            secrets_bound_to="url",
        ),
    )
    task = services.task_create(
        id="bound", action="bound_secret", payload={"url": "https://a.example/", "token": "t0k"}
    )
    with pytest.raises(ValidationError) as info:
        services.task_update(
            task=task, data={"payload": {"url": "https://b.example/", "token": "set"}}
        )
    (message,) = info.value.message_dict["payload"]
    assert "token" in message and "https://b.example" not in message
    assert Task.objects.get(pk="bound").payload["token"] == "t0k"  # nothing written
    moved = {"url": "https://b.example/", "token": "new"}
    assert services.task_update(task=task, data={"payload": moved}).payload["token"] == "new"
