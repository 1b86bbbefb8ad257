"""Every run records who asked for it (``Run.requested_by``): a user through the API, the admin
or the CLI; beat for a schedule's fire; ``schedule:<module>`` for a schedule declared in code;
``code`` for an enqueue from code; ``retry:<run id>`` for the next attempt after a failure.
Shown on the run page, in the API (field and filter) and the CLI (``show``, ``runs
--requested-by``); the logs name the user of every write."""

from __future__ import annotations

import getpass
import io
import json
import logging
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.beat import firing
from tasks_app.models import Run, RunStatus, Task
from tasks_app.services.tokens import token_create
from tasks_app.worker import run_execution
from tests.api.conftest import ALL_PERMS, user_with
from tests.django_tasks import functions
from tests.stored_rows import run_set

pytestmark = pytest.mark.django_db


def _api(username: str) -> APIClient:
    user = user_with(username, *ALL_PERMS)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user).token}")
    return client


def _cli(*args: str) -> str:
    out = io.StringIO()
    call_command("tasks", *args, stdout=out)
    return out.getvalue()


def test_the_api_records_and_filters_who_asked(caplog: pytest.LogCaptureFixture) -> None:
    alice, bob = _api("alice"), _api("bob")
    caplog.set_level(logging.INFO)
    task = {"id": "hello", "action": "echo", "payload": {"message": "x"}}
    made = alice.post("/api/tasks", task, "json")
    assert made.status_code == 201, made.content
    first = alice.post("/api/tasks/hello/execute").json()
    second = bob.post("/api/tasks/hello/schedule", {"delay_seconds": 60}, "json").json()
    assert first["requested_by"] == "alice" and second["requested_by"] == "bob"
    assert alice.get(f"/api/runs/{first['id']}").json()["requested_by"] == "alice"
    mine = alice.get("/api/runs", {"requested_by": "bob"}).json()["results"]
    assert [r["id"] for r in mine] == [second["id"]]
    assert bob.get("/api/tasks/hello/runs", {"requested_by": "nobody"}).json()["results"] == []
    # The logs name the user of every write.
    bob.post(f"/api/runs/{second['id']}/cancel")
    alice.patch("/api/tasks/hello", {"name": "Hello"}, "json")
    alice.post("/api/tasks/hello/pause", {"note": "maintenance"}, "json")
    lines = caplog.text
    for expected in (
        "task hello created by alice",
        f"run {first['id']} of task hello created by alice",
        f"run {second['id']} of task hello created by bob",
        f"run {second['id']} cancelled by bob",
        "task hello updated by alice",
        "task hello paused by alice",
    ):
        assert expected in lines, expected


def test_the_admin_records_and_shows_who_asked() -> None:
    task = services.task_create(id="hello", action="echo", payload={"message": "x"})
    user = user_with("carol", *ALL_PERMS)
    user.is_staff = True
    user.save()
    browser = Client()
    browser.force_login(user)
    browser.post(reverse("admin:tasks_app_task_run_now", args=[task.pk]))
    run = Run.objects.get()
    assert run.requested_by == "carol"
    page = browser.get(reverse("admin:tasks_app_run_change", args=[run.pk])).content.decode()
    assert "Requested by" in page and "carol" in page


def test_the_cli_records_shows_and_filters_who_asked() -> None:
    services.task_create(id="hello", action="echo", payload={"message": "x"})
    user_with("dave", *ALL_PERMS)
    by_dave = json.loads(_cli("execute", "hello", "--as", "dave", "--json"))
    by_operator = json.loads(_cli("execute", "hello", "--json"))
    assert by_dave["requested_by"] == "dave"
    assert by_operator["requested_by"] == f"cli:{getpass.getuser()}"
    shown = json.loads(_cli("show", by_dave["id"], "--json"))
    assert shown["requested_by"] == "dave"
    assert "requested by  dave" in _cli("show", by_dave["id"])
    listed = json.loads(_cli("runs", "--requested-by", "dave", "--json"))
    assert [r["id"] for r in listed] == [by_dave["id"]]


def test_runs_made_without_a_person_name_what_made_them() -> None:
    task = services.task_create(
        id="every-10s", action="noop", schedule_type="interval", interval_seconds=10
    )
    services.task_create(
        id="declared", action="noop", schedule_type="interval", interval_seconds=10
    )
    Task.objects.filter(pk="declared").update(declared_in="myproject.schedules")
    due = max(Task.objects.get(pk=p).state.next_run_at for p in ("every-10s", "declared"))
    firing.schedule_fire_due(now=due, lookahead=timedelta(seconds=2))
    fired = dict(Run.objects.values_list("task_id", "requested_by"))
    assert fired == {"every-10s": "beat", "declared": "schedule:myproject.schedules"}

    functions.add.enqueue(1, 2)
    assert Run.objects.get(trigger="enqueue").requested_by == "code"

    flaky = services.task_create(
        id="flaky", action="fail", payload={"message": "no"}, max_retries=1
    )
    run = services.task_execute(task=flaky, by=user_with("erin", *ALL_PERMS))
    assert run.requested_by == "erin"
    run_set(run.pk, status=RunStatus.QUEUED, queued_at=timezone.now())
    run_execution.run_execute(run_id=str(run.pk), worker="w1")
    retry = Run.objects.get(task=flaky, attempt=2)
    assert retry.requested_by == f"retry:{run.pk}"
    assert task.pk == "every-10s"


def test_a_once_task_saved_by_a_user_is_their_run() -> None:
    at = (timezone.now() + timedelta(hours=1)).isoformat()
    client = _api("frank")
    made = client.post(
        "/api/tasks",
        {"id": "once", "action": "noop", "schedule_type": "once", "run_at": at},
        "json",
    )
    assert made.status_code == 201, made.content
    assert Run.objects.get().requested_by == "frank"
