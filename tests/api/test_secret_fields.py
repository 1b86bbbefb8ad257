"""Secret payload fields (``writeOnly``: the ``http`` action's headers) are write-only: no
user reads them back through the API, the CLI or the admin once saved; "set" sent back
keeps them; changing them needs the action's permission."""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from rest_framework.test import APIClient

from tasks_app.models import Task, TaskAuditEntry
from tasks_app.services.tokens import token_create

pytestmark = pytest.mark.django_db

SECRET = "Bearer s3cr3t-webhook-credential"
PAYLOAD = {
    "url": "https://hooks.example.com/orders",
    "headers": {"Authorization": SECRET, "X-Api-Key": "k3y-s3cr3t"},
}


def _client(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user).token}")
    return client


def _user(name: str, *codenames: str, staff: bool = False) -> User:
    user = User.objects.create_user(name, password="pw-Secret-2026", is_staff=staff)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    return user


@pytest.fixture
def root() -> User:
    return User.objects.create_superuser("root", "root@example.com", "pw-Root-2026")


@pytest.fixture
def webhook(root: User) -> dict:
    response = _client(root).post(
        "/api/tasks", {"id": "hook", "action": "http", "payload": PAYLOAD}, format="json"
    )
    assert response.status_code == 201, response.content
    return response.json()


def _no_secret(text: str) -> None:
    assert "s3cr3t" not in text, text


def test_no_user_reads_the_headers_back_through_the_api(root: User, webhook: dict) -> None:
    assert webhook["payload"] == {"url": PAYLOAD["url"], "headers": "set"}
    users = [
        root,
        _user("viewer", "view_task", "view_run"),
        _user("hooker", "view_task", "change_task", "use_action_http"),
    ]
    for user in users:
        client = _client(user)
        for path in ("/api/tasks/hook", "/api/tasks", "/api/tasks?search=hook"):
            response = client.get(path)
            assert response.status_code == 200, (user, path)
            _no_secret(response.content.decode())
    assert Task.objects.get().payload == PAYLOAD  # stored, for the runs to send


def test_the_cli_shows_the_headers_as_set(webhook: dict) -> None:
    for args in (["get", "hook", "--json"], ["get", "hook"], ["list", "--json"]):
        out = io.StringIO()
        call_command("tasks", *args, stdout=out)
        _no_secret(out.getvalue())
        assert "set" in out.getvalue()


def test_the_admin_pages_and_audit_trail_show_no_secret(root: User, webhook: dict) -> None:
    from django.test import Client

    for user in (root, _user("viewer", "view_task", "view_taskauditentry", staff=True)):
        browser = Client()
        browser.force_login(user)
        page = browser.get("/admin/tasks_app/task/hook/change/")
        assert page.status_code == 200
        _no_secret(page.content.decode())
    _no_secret(json.dumps([entry.changes for entry in TaskAuditEntry.objects.all()]))


def test_set_sent_back_keeps_the_stored_headers(root: User, webhook: dict) -> None:
    client = _client(root)
    read = client.get("/api/tasks/hook").json()
    payload = {**read["payload"], "url": "https://hooks.example.com/v2"}
    response = client.patch("/api/tasks/hook", {"payload": payload}, format="json")
    assert response.status_code == 200, response.content
    _no_secret(response.content.decode())
    stored = Task.objects.get().payload
    assert stored == {"url": "https://hooks.example.com/v2", "headers": PAYLOAD["headers"]}
    _no_secret(json.dumps([entry.changes for entry in TaskAuditEntry.objects.all()]))


def test_new_headers_replace_and_leaving_them_out_removes_them(root: User, webhook) -> None:
    client = _client(root)
    new = {"url": PAYLOAD["url"], "headers": {"Authorization": "Bearer other"}}
    assert client.patch("/api/tasks/hook", {"payload": new}, format="json").status_code == 200
    assert Task.objects.get().payload == new
    bare = {"url": PAYLOAD["url"]}
    assert client.patch("/api/tasks/hook", {"payload": bare}, format="json").status_code == 200
    assert Task.objects.get().payload == bare


def test_changing_the_headers_needs_the_action_permission(webhook: dict) -> None:
    editor = _user("editor", "view_task", "change_task")  # no use_action_http
    new = {"url": PAYLOAD["url"], "headers": {"Authorization": "Bearer mine"}}
    response = _client(editor).patch("/api/tasks/hook", {"payload": new}, format="json")
    assert response.status_code == 403
    assert "use_action_http" in response.json()["error"]
    assert Task.objects.get().payload == PAYLOAD


def test_the_action_list_marks_the_headers_write_only(root: User) -> None:
    actions = _client(root).get("/api/actions?page_size=100").json()["results"]
    http = next(action for action in actions if action["name"] == "http")
    assert http["schema"]["properties"]["headers"]["writeOnly"] is True
