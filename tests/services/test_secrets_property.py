"""Property: whatever a task goes through (its action changed back and forth between actions
with secret fields and one without, its URL moved, runs made with its payload, with their own
payload, with the stored secret sent as "set" to other URLs, runs executed), no reader ever
sees a secret in any field of any way out: the REST API's task and run JSON, the admin's run
and task pages, ``manage.py tasks show --json``."""

from __future__ import annotations

import io
import itertools
import json
import os
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from tasks_app import actions
from tasks_app.actions import base
from tasks_app.models import Run, RunStatus, Task
from tasks_app.services.tokens import token_create
from tasks_app.worker import run_execution
from tests.api.conftest import user_with
from tests.stored_rows import run_set

pytestmark = pytest.mark.django_db

MARK = "S3CRET"
VAULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "url": {"type": "string"},
        "token": {"type": "string", "writeOnly": True},
        "auth": {
            "type": "object",
            "properties": {"password": {"type": "string", "writeOnly": True}},
        },
        "fail": {"type": "boolean"},
    },
    "required": ["url"],
}


def tell(payload: dict[str, Any], ctx: actions.RunContext) -> actions.Outcome:
    """An action that gives its whole payload away: in its output, result and error."""
    if payload.get("fail"):
        raise ValueError(f"could not use {payload!r}")
    return actions.Outcome(output=json.dumps(payload), result={"payload": payload})


@pytest.fixture
def vault(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        base._REGISTRY,
        "vault",
        base.Action(
            name="vault",
            func=tell,
            schema=VAULT_SCHEMA,
            validator=base.Draft202012Validator(VAULT_SCHEMA),
            secrets_bound_to="url",
        ),
    )


secrets = st.text(alphabet="abcXYZ019 -_/=+'\"\\<>&é", min_size=1, max_size=12).map(
    lambda s: f"{MARK}{s}"
)
urls = st.sampled_from(
    [
        "https://hooks.example.com/orders",
        "https://hooks.example.com/orders?page=2",
        "https://hooks.example.com/admin/delete",
        "https://evil.example.net/orders",
        "http://hooks.example.com:8080/orders",
    ]
)
retarget = st.tuples(st.just("retarget"), st.sampled_from(["http", "vault", "echo"]), urls, secrets)
move = st.tuples(st.just("move"), urls)
run = st.tuples(st.just("run"), st.sampled_from(["task", "set", "elsewhere", "own"]), urls, secrets)
work = st.tuples(st.just("work"), st.booleans())
steps = st.lists(st.one_of(retarget, move, run, run, work), min_size=3, max_size=7)
_ids = itertools.count()


def fresh(action: str, url: str, secret: str) -> dict[str, Any]:
    if action == "http":
        return {"url": url, "headers": {"Authorization": secret, "X-Key": secret[::-1] + "x"}}
    if action == "vault":
        return {"url": url, "token": secret, "auth": {"password": secret + "pw"}}
    return {"message": "hello"}


def _seen(answer: Any) -> str:
    text = answer.content.decode() if hasattr(answer, "content") else str(answer)
    assert MARK not in text, text
    return text


@settings(
    max_examples=int(os.environ.get("SECRETS_PROPERTY_EXAMPLES", "12")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(  # a run made with the task's credential, then the task's action changed
    first=("retarget", "http", "https://hooks.example.com/orders", f"{MARK}-a"),
    plan=[
        ("run", "set", "https://hooks.example.com/orders", f"{MARK}-b"),
        ("retarget", "echo", "https://hooks.example.com/orders", f"{MARK}-c"),
    ],
)
@example(  # an action that writes its secret in its output and its error
    first=("retarget", "vault", "https://hooks.example.com/orders", f"{MARK}-a"),
    plan=[
        ("run", "own", "https://hooks.example.com/orders", f"{MARK}-be"),
        ("run", "set", "https://hooks.example.com/orders", f"{MARK}-b"),
        ("work", True),
    ],
)
@given(first=retarget, plan=steps)
def test_no_reader_ever_sees_a_secret(vault: None, first: tuple, plan: list[tuple]) -> None:
    root = User.objects.filter(username="root").first() or User.objects.create_superuser(
        "root", "root@example.com", "pw-Root-2026"
    )
    viewer = User.objects.filter(username="viewer").first()
    if viewer is None:
        viewer = user_with("viewer", "view_task", "view_run")
        viewer.is_staff = True
        viewer.save()
    operator, reader = APIClient(), APIClient()
    operator.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=root).token}")
    reader.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=viewer).token}")
    task_id = f"prop-{next(_ids)}"
    _, action, url, secret = first
    made = operator.post(
        "/api/tasks",
        {"id": task_id, "action": action, "payload": fresh(action, url, secret)},
        "json",
    )
    assert made.status_code == 201, made.content
    _seen(made)

    for step in plan:
        task = Task.objects.get(pk=task_id)
        shown = operator.get(f"/api/tasks/{task_id}").json()["payload"]
        if step[0] == "retarget":
            _, action, url, secret = step
            body = {"action": action, "payload": fresh(action, url, secret)}
            _seen(operator.patch(f"/api/tasks/{task_id}", body, "json"))
        elif step[0] == "move" and "url" in shown:
            _seen(
                operator.patch(
                    f"/api/tasks/{task_id}", {"payload": {**shown, "url": step[1]}}, "json"
                )
            )
        elif step[0] == "run":
            _, mode, url, secret = step
            own = {
                "task": None,
                "set": shown,
                "elsewhere": {**shown, "url": url} if "url" in shown else shown,
                "own": fresh(task.action, url, secret),
            }[mode]
            if task.action == "vault" and own is not None and step[1] != "task":
                own = {**own, "fail": secret.endswith("e")}
            body = {} if own is None else {"payload": own}
            _seen(operator.post(f"/api/tasks/{task_id}/execute", body, "json"))
        elif step[0] == "work" and task.action != "http":  # no request leaves the test
            for waiting in Run.objects.filter(task_id=task_id, status=RunStatus.PENDING):
                run_set(waiting.pk, status=RunStatus.QUEUED, queued_at=timezone.now())
                run_execution.run_execute(run_id=str(waiting.pk), worker="w1")

    browser = Client()
    browser.force_login(viewer)
    _seen(reader.get(f"/api/tasks/{task_id}"))
    _seen(reader.get(f"/api/runs?task={task_id}"))
    _seen(browser.get(reverse("admin:tasks_app_task_change", args=[task_id])))
    for run_id in Run.objects.filter(task_id=task_id).values_list("pk", flat=True):
        _seen(reader.get(f"/api/runs/{run_id}"))
        _seen(operator.get(f"/api/runs/{run_id}"))
        _seen(browser.get(reverse("admin:tasks_app_run_change", args=[run_id])))
        out = io.StringIO()
        call_command("tasks", "show", str(run_id), "--json", "--as", "viewer", stdout=out)
        _seen(out.getvalue())
