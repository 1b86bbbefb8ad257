"""Per-action permissions (``tasks_app.services.permissions``) through the admin, the API and the CLI.

The matrix: each guarded action kind (exec, command, http, email) × a user holding every
task and run permission with or without ``tasks_app.use_action_<kind>`` × each entry point.
In each cell the user creates a task, changes one and runs one; a refusal names the
permission and writes nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from tasks_app import actions, services
from tasks_app.models import RunStatus, Task
from tasks_app.services import permissions
from tasks_app.services.tokens import token_create
from tests.processes import ROOT, process_env
from tests.shared import form
from tests.stored_rows import run_set

pytestmark = pytest.mark.django_db

PAYLOADS: dict[str, dict[str, Any]] = {
    "exec": {"argv": ["echo", "hello"]},
    "command": {"command": "check"},
    "http": {"url": "https://hooks.example.com/deploy"},
    "email": {"to": ["a@example.com"], "subject": "hi", "body": "hello"},
}
MODEL_PERMS = [f"{v}_{m}" for v in ("view", "add", "change", "delete") for m in ("task", "run")]


@pytest.fixture(autouse=True)
def _exec_enabled(settings: Any) -> None:
    settings.TASKS_EXEC_ALLOWLIST = ["echo"]


def make_user(name: str, *codenames: str, staff: bool = True) -> User:
    user = User.objects.create_user(username=name, password="pw-not-used-12345", is_staff=staff)
    found = Permission.objects.filter(content_type__app_label="tasks_app", codename__in=codenames)
    assert found.count() == len(set(codenames)), codenames
    user.user_permissions.set(found)
    return User.objects.get(pk=user.pk)  # no permission cache


@dataclass
class Outcome:
    ok: bool
    message: str


# -- the three entry points, each doing create / change / execute as ``user`` --------------


class Api:
    def __init__(self, user: User) -> None:
        self.client = APIClient()
        self.client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user).token}")

    def _outcome(self, response: Any, ok: int) -> Outcome:
        if response.status_code == ok:
            return Outcome(True, "")
        assert response.status_code == 403, response.content
        body = response.json()
        return Outcome(False, f"{body['error']} {json.dumps(body['detail'])}")

    def create(self, task_id: str, action: str, payload: dict[str, Any]) -> Outcome:
        body = {"id": task_id, "action": action, "payload": payload}
        return self._outcome(self.client.post("/api/tasks", body, format="json"), 201)

    def change(self, task: Task) -> Outcome:
        body = {"name": "renamed"}
        return self._outcome(self.client.patch(f"/api/tasks/{task.pk}", body, format="json"), 200)

    def execute(self, task: Task) -> Outcome:
        return self._outcome(self.client.post(f"/api/tasks/{task.pk}/execute"), 202)


class Admin:
    def __init__(self, user: User) -> None:
        self.client = Client()
        self.client.force_login(user)

    def _form_outcome(self, response: Any) -> Outcome:
        if response.status_code == 302:
            return Outcome(True, "")
        assert response.status_code == 200
        errors = response.context["adminform"].form.errors
        return Outcome(False, " ".join(errors.get("action", [])))

    def create(self, task_id: str, action: str, payload: dict[str, Any]) -> Outcome:
        data = form(id=task_id, action=action, payload=json.dumps(payload))
        return self._form_outcome(self.client.post(reverse("admin:tasks_app_task_add"), data))

    def change(self, task: Task) -> Outcome:
        data = form(id=task.pk, action=task.action, payload=json.dumps(task.payload))
        data["name"] = "renamed"
        url = reverse("admin:tasks_app_task_change", args=[task.pk])
        return self._form_outcome(self.client.post(url, data))

    def execute(self, task: Task) -> Outcome:
        url = reverse("admin:tasks_app_task_run_now", args=[task.pk])
        response = self.client.post(url, follow=True)
        assert response.status_code == 200
        texts = [str(m) for m in response.context["messages"]]
        refused = [t for t in texts if "refused" in t]
        return Outcome(not refused, " ".join(refused))


class Cli:
    def __init__(self, user: User) -> None:
        self.username = user.username

    def _call(self, *args: str) -> Outcome:
        try:
            call_command("tasks", *args, "--as", self.username, stdout=StringIO())
        except CommandError as exc:
            assert exc.returncode == 1
            return Outcome(False, str(exc))
        return Outcome(True, "")

    def create(self, task_id: str, action: str, payload: dict[str, Any]) -> Outcome:
        return self._call("create", task_id, "--action", action, "--payload", json.dumps(payload))

    def change(self, task: Task) -> Outcome:
        return self._call("update", task.pk, "--name", "renamed")

    def execute(self, task: Task) -> Outcome:
        return self._call("execute", task.pk)


ENTRY_POINTS: dict[str, Callable[[User], Any]] = {"admin": Admin, "api": Api, "cli": Cli}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("holds", [True, False], ids=["with-permission", "without-permission"])
@pytest.mark.parametrize("action", sorted(PAYLOADS))
def test_permission_matrix(entry: str, holds: bool, action: str) -> None:
    permission = f"tasks_app.use_action_{action}"
    extra = [f"use_action_{action}"] if holds else []
    user = make_user("alice", *MODEL_PERMS, *extra)
    side = ENTRY_POINTS[entry](user)
    existing = services.task_create(id="existing", action=action, payload=PAYLOADS[action])

    created = side.create("new-task", action, PAYLOADS[action])
    changed = side.change(existing)
    executed = side.execute(existing)

    existing.refresh_from_db()
    if holds:
        assert created.ok and changed.ok and executed.ok, (created, changed, executed)
        assert Task.objects.get(pk="new-task").action == action
        assert existing.name == "renamed"
        assert existing.runs.count() == 1
    else:
        for outcome in (created, changed, executed):
            assert not outcome.ok
            assert permission in outcome.message, outcome.message
        assert not Task.objects.filter(pk="new-task").exists()
        assert existing.name == ""
        assert not existing.runs.exists()


# -- defaults and the choices offered ------------------------------------------------------


def test_by_default_only_superusers_hold_the_action_permissions() -> None:
    """The issue's user: add_task and change_task only, not staff. Every guarded action is
    refused to them; a superuser may use them all; harmless actions need nothing extra."""
    # (add_run as well: the interval the user set makes runs, which needs it.)
    plain = make_user("plain", "add_task", "change_task", "add_run", staff=False)
    boss = User.objects.create_superuser("boss", "b@example.com", "pw-boss-12345")
    for action in PAYLOADS:
        assert not permissions.may_use(plain, action)
        assert permissions.may_use(boss, action)
    usable = {a.name for a in permissions.usable_actions(plain)}
    assert {"echo", "fail", "noop", "sleep"} <= usable
    assert not usable & set(PAYLOADS)
    api = Api(plain)
    response = api.client.post(
        "/api/tasks",
        {
            "action": "email",
            "payload": PAYLOADS["email"],
            "schedule_type": "interval",
            "interval_seconds": 1,
        },
        format="json",
    )
    assert response.status_code == 403
    assert response.json() == {
        "error": "The email action needs the permission tasks_app.use_action_email, "
        "which you do not hold.",
        "detail": {"action": ["needs the permission tasks_app.use_action_email"]},
    }
    assert not Task.objects.exists()


def test_admin_action_list_offers_only_the_allowed_kinds() -> None:
    user = make_user("http-only", *MODEL_PERMS, "use_action_http")
    admin = Admin(user)
    page = admin.client.get(reverse("admin:tasks_app_task_add"))
    offered = {value for value, _ in page.context["adminform"].form.fields["action"].choices}
    unguarded = {a.name for a in actions.all_actions() if a.permission is None}
    assert offered == {"", "http", *unguarded}
    assert {"echo", "noop"} <= unguarded
    # A forged choice is a form error on the action field, nothing saved.
    refused = admin.create("forged", "exec", PAYLOADS["exec"])
    assert not refused.ok
    assert "tasks_app.use_action_exec" in refused.message
    assert not Task.objects.filter(pk="forged").exists()


def test_actions_api_names_each_permission() -> None:
    api = Api(make_user("viewer", "view_task"))
    listed = {a["name"]: a["permission"] for a in api.client.get("/api/actions").json()["results"]}
    assert listed["exec"] == "tasks_app.use_action_exec"
    assert listed["email"] == "tasks_app.use_action_email"
    assert listed["echo"] is None


# -- every other way to change or run a task -----------------------------------------------


def test_switching_a_task_to_or_from_a_guarded_action_needs_its_permission() -> None:
    user = make_user("bob", *MODEL_PERMS)
    api = Api(user)
    echo = services.task_create(id="harmless", action="echo", payload={"message": "hi"})
    response = api.client.patch(
        f"/api/tasks/{echo.pk}",
        {"action": "exec", "payload": PAYLOADS["exec"]},
        format="json",
    )
    assert response.status_code == 403
    assert "tasks_app.use_action_exec" in response.json()["error"]
    exec_task = services.task_create(id="guarded", action="exec", payload=PAYLOADS["exec"])
    response = api.client.put(
        f"/api/tasks/{exec_task.pk}",
        {"action": "echo", "payload": {"message": "x"}},
        format="json",
    )
    assert response.status_code == 403
    echo.refresh_from_db()
    exec_task.refresh_from_db()
    assert (echo.action, exec_task.action) == ("echo", "exec")
    outcome = Admin(user)
    data = form(id=echo.pk, action="exec", payload=json.dumps(PAYLOADS["exec"]))
    response = outcome.client.post(reverse("admin:tasks_app_task_change", args=[echo.pk]), data)
    assert "tasks_app.use_action_exec" in " ".join(
        response.context["adminform"].form.errors["action"]
    )


def test_every_explicit_trigger_is_refused_without_the_permission() -> None:
    """Schedule (one-off and recurring), backfill, resume and retry through the API and the
    CLI; retry, resume, duplicate and run-now (list action) through the admin."""
    user = make_user("carol", *MODEL_PERMS)
    task = services.task_create(
        id="nightly",
        action="command",
        payload=PAYLOADS["command"],
        schedule_type="interval",
        interval_seconds=3600,
    )
    services.task_pause(task=task, note="held")
    failed = services.task_execute(task=task)
    run_set(failed.pk, status=RunStatus.FAILED)
    now = timezone.now()
    api = Api(user).client
    refused = [
        api.post(f"/api/tasks/{task.pk}/schedule", {"delay_seconds": 60}, format="json"),
        api.post(
            f"/api/tasks/{task.pk}/schedule",
            {"schedule_type": "interval", "interval_seconds": 1},
            format="json",
        ),
        api.post(
            f"/api/tasks/{task.pk}/backfill",
            {"start": (now - timedelta(hours=3)).isoformat(), "end": now.isoformat()},
            format="json",
        ),
        api.post(f"/api/tasks/{task.pk}/resume"),
        api.post(f"/api/runs/{failed.pk}/retry"),
    ]
    assert [r.status_code for r in refused] == [403] * 5
    assert all("tasks_app.use_action_command" in r.json()["error"] for r in refused)

    cli = Cli(user)
    for args in (
        ("schedule", task.pk, "--in", "60s"),
        (
            "backfill",
            task.pk,
            "--start",
            (now - timedelta(hours=3)).isoformat(),
            "--end",
            now.isoformat(),
        ),
        ("resume", task.pk),
        ("retry", str(failed.pk)),
    ):
        outcome = cli._call(*args)
        assert not outcome.ok and "tasks_app.use_action_command" in outcome.message, args

    admin = Admin(user).client
    admin.post(reverse("admin:tasks_app_task_resume", args=[task.pk]))
    admin.post(reverse("admin:tasks_app_task_duplicate", args=[task.pk]))
    admin.post(reverse("admin:tasks_app_run_retry", args=[failed.pk]))
    changelist = reverse("admin:tasks_app_task_changelist")
    admin.post(changelist, {"action": "run_now", "_selected_action": [task.pk]})
    admin.post(changelist, {"action": "resume", "_selected_action": [task.pk]})
    runs = reverse("admin:tasks_app_run_changelist")
    admin.post(runs, {"action": "retry", "_selected_action": [str(failed.pk)]})

    task.refresh_from_db()
    assert task.paused and task.interval_seconds == 3600
    assert list(Task.objects.values_list("pk", flat=True)) == ["nightly"]
    assert list(task.runs.values_list("pk", flat=True)) == [failed.pk]


def test_a_task_with_an_action_the_user_may_not_use_shows_it_and_refuses_saving() -> None:
    services.task_create(id="guarded", action="exec", payload=PAYLOADS["exec"])
    admin = Admin(make_user("dave", *MODEL_PERMS))
    page = admin.client.get(reverse("admin:tasks_app_task_change", args=["guarded"]))
    choices = dict(page.context["adminform"].form.fields["action"].choices)
    assert choices["exec"] == "exec — needs the permission tasks_app.use_action_exec"


# -- the CLI's user ------------------------------------------------------------------------


def test_cli_without_as_is_the_trusted_operator_and_with_as_acts_as_the_user() -> None:
    out = StringIO()
    call_command(
        "tasks",
        "create",
        "op-task",
        "--action",
        "exec",
        "--payload",
        json.dumps(PAYLOADS["exec"]),
        stdout=out,
    )
    assert Task.objects.filter(pk="op-task", action="exec").exists()
    make_user("eve", "view_task")  # may look, may not create
    with pytest.raises(CommandError) as info:
        call_command("tasks", "create", "x", "--action", "echo", "--as", "eve")
    assert info.value.returncode == 1
    assert (
        str(info.value)
        == "permission denied: create needs tasks_app.add_task, which eve does not hold"
    )
    with pytest.raises(CommandError, match="--as: no active user 'nobody-here'"):
        call_command("tasks", "list", "--as", "nobody-here")


@pytest.mark.django_db(transaction=True)
def test_cli_refusal_is_one_line_and_exit_status_1() -> None:
    make_user("frank", *MODEL_PERMS)
    done = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "tasks",
            "create",
            "t1",
            "--command",
            "echo hi",
            "--as",
            "frank",
        ],
        cwd=ROOT,
        env=process_env(TASKS_EXEC_ALLOWLIST="echo"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "CommandError: permission denied: the exec action needs the permission "
        "tasks_app.use_action_exec, which you do not hold"
    ]
    assert not Task.objects.exists()
