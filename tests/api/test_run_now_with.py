"""Run now with another payload: ``POST /api/tasks/{id}/execute`` with ``payload``, checked
as the task's payload would be, shown on the run; a ``@task`` function's task run with other
arguments."""

from __future__ import annotations

import pytest
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.models import Run, RunStatus
from tasks_app.services.tokens import token_create
from tasks_app.worker import run_execution
from tests.api.conftest import ALL_PERMS, user_with
from tests.django_tasks import functions
from tests.stored_rows import run_set

pytestmark = pytest.mark.django_db


def work(run_id: str) -> Run:
    """What a worker does once the run is published (at commit, which a test never reaches)."""
    run_set(run_id, status=RunStatus.QUEUED, queued_at=timezone.now())
    done = run_execution.run_execute(run_id=run_id, worker="w1")
    assert done is not None
    return done


def test_a_run_now_with_another_payload_runs_it_and_shows_it(api: APIClient) -> None:
    services.task_create(id="hello", action="echo", payload={"message": "hi"})
    answer = api.post("/api/tasks/hello/execute", {"payload": {"message": "other"}}, "json")
    assert answer.status_code == 202, answer.content
    run_id = answer.json()["id"]
    assert answer.json()["payload"] == {"message": "other"}
    assert work(run_id).output == "other"
    shown = api.get(f"/api/runs/{run_id}").json()
    assert shown["payload"] == {"message": "other"} and shown["output"] == "other"
    plain = api.post("/api/tasks/hello/execute").json()  # no body: the task's payload
    assert plain["payload"] is None


def test_a_payload_that_does_not_fit_the_action_is_400_naming_it_and_writes_nothing(
    api: APIClient,
) -> None:
    services.task_create(id="hello", action="echo", payload={"message": "hi"})
    for body, named in (
        ({"payload": {"nope": 1}}, "does not fit action 'echo'"),
        ({"payload": [1]}, "must be a JSON object"),
        ({"payload": {"message": "x"}, "extra": 1}, "extra"),
    ):
        answer = api.post("/api/tasks/hello/execute", body, "json")
        assert answer.status_code == 400, answer.content
        assert named in str(answer.json()), answer.json()
    assert not Run.objects.exists()


def test_reading_is_not_running(readonly_api: APIClient) -> None:
    services.task_create(id="hello", action="echo", payload={"message": "hi"})
    answer = readonly_api.post("/api/tasks/hello/execute", {"payload": {"message": "x"}}, "json")
    assert answer.status_code == 403
    assert not Run.objects.exists()


@override_settings(TASKS_DJANGO_TASKS=[])
def test_a_functions_task_runs_with_other_arguments_but_not_another_function() -> None:
    """Other arguments for the function's own task choose no new code; naming another
    function is a person's choice of code, which ``TASKS_DJANGO_TASKS`` (empty) refuses."""
    client = APIClient()
    user = user_with("fn-operator", *ALL_PERMS, "use_action_django_task")
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user).token}")
    path = "tests.django_tasks.functions.add"
    functions.add.enqueue(1, 2)
    answer = client.post(
        f"/api/tasks/{path}/execute", {"payload": {"task": path, "args": [5, 6]}}, "json"
    )
    assert answer.status_code == 202, answer.content
    assert work(answer.json()["id"]).result == {"sum": 11}
    other = {"task": "tests.django_tasks.functions.greet", "args": ["x"]}
    refused = client.post(f"/api/tasks/{path}/execute", {"payload": other}, "json")
    assert refused.status_code == 400 and "TASKS_DJANGO_TASKS" in str(refused.json())
    wrong = client.post(
        f"/api/tasks/{path}/execute", {"payload": {"task": path, "args": [1]}}, "json"
    )
    assert wrong.status_code == 400 and "missing a required argument" in str(wrong.json())
