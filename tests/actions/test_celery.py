"""The ``celery`` action: a project's own Celery tasks, allowed by name pattern, called
inside the run (result, failure, retries, time limit), refused by name when saved."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.test import Client
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.models import RunStatus, Task
from tasks_app.services.tokens import token_create
from tests.actions.conftest import CELERY_TASK_PATTERNS
from tests.actions.helpers import execute_in_process, finished
from tests.processes import wait_until

ADD = "tests.effects.tasks.add"


@pytest.fixture(autouse=True)
def _allow_test_tasks(settings: object) -> None:
    settings.TASKS_CELERY_TASKS = CELERY_TASK_PATTERNS  # type: ignore[attr-defined]


def refused(payload: dict[str, object]) -> str:
    with pytest.raises(ValidationError) as info:
        services.task_create(id="cel", action="celery", payload=payload)
    assert not Task.objects.filter(pk="cel").exists()
    return " ".join(info.value.message_dict["payload"])


@pytest.mark.django_db
def test_a_shared_task_runs_inside_the_run_and_its_return_value_is_the_result() -> None:
    task = services.task_create(
        id="add", action="celery", payload={"task": ADD, "args": [2, 3], "kwargs": {"label": "n"}}
    )
    run = execute_in_process(services.task_execute(task=task))
    assert run.status == RunStatus.COMPLETED
    assert run.result == {"n": 5}
    assert json.loads(run.output) == {"n": 5}


@pytest.mark.django_db
def test_the_task_sees_the_run_id_as_its_request_id() -> None:
    task = services.task_create(
        id="who", action="celery", payload={"task": "tests.effects.tasks.whoami"}
    )
    run = execute_in_process(services.task_execute(task=task))
    assert run.result == {"id": str(run.id), "retries": 0}


@pytest.mark.django_db
def test_an_exception_fails_the_run_with_its_class_and_message() -> None:
    task = services.task_create(
        id="boom",
        action="celery",
        max_retries=0,
        payload={"task": "tests.effects.tasks.boom", "args": ["kaboom"]},
    )
    run = execute_in_process(services.task_execute(task=task))
    assert run.status == RunStatus.FAILED
    assert run.error.startswith("RuntimeError: kaboom")


@pytest.mark.django_db
def test_self_retry_is_one_of_the_runs_retries_not_a_celery_message() -> None:
    task = services.task_create(
        id="retry",
        action="celery",
        max_retries=1,
        payload={"task": "tests.effects.tasks.retry_me"},
    )
    run = execute_in_process(services.task_execute(task=task))
    assert run.status == RunStatus.RETRYING
    assert "not yet" in run.error
    assert task.runs.count() == 2  # the next attempt is a run of ours


@pytest.mark.django_db
def test_a_return_value_that_is_not_json_is_described_not_stored() -> None:
    task = services.task_create(
        id="opaque", action="celery", payload={"task": "tests.effects.tasks.opaque"}
    )
    run = execute_in_process(services.task_execute(task=task))
    assert run.status == RunStatus.COMPLETED
    assert run.result is None
    assert "not JSON-serializable" in run.output


@pytest.mark.django_db
def test_names_outside_the_patterns_or_unregistered_are_refused_when_saved(
    settings: object,
) -> None:
    message = refused({"task": "billing.tasks.charge"})
    assert "task: 'billing.tasks.charge' matches none of the allowed patterns" in message
    assert "TASKS_CELERY_TASKS" in message
    message = refused({"task": "tests.effects.tasks.missing"})
    assert "no Celery task of that name is registered" in message
    settings.TASKS_CELERY_TASKS = ["*"]  # type: ignore[attr-defined]
    assert "own or Celery's built-in tasks" in refused({"task": "tasks_app.execute_run"})
    assert "own or Celery's built-in tasks" in refused({"task": "celery.backend_cleanup"})
    settings.TASKS_CELERY_TASKS = []  # type: ignore[attr-defined]  # the default
    assert "allowed patterns: none" in refused({"task": ADD})


@pytest.mark.django_db
def test_the_api_refuses_a_name_outside_the_patterns_with_400_naming_the_field() -> None:
    user = get_user_model().objects.create_superuser("api-root", "r@example.com", "pw-123456789")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user).token}")
    response = api.post(
        "/api/tasks",
        {"id": "cel", "action": "celery", "payload": {"task": "os.system", "args": ["id"]}},
        format="json",
    )
    assert response.status_code == 400, response.content
    [message] = response.json()["detail"]["payload"]
    assert "'os.system' matches none of the allowed patterns" in message
    assert not Task.objects.filter(pk="cel").exists()
    ok = api.post(
        "/api/tasks", {"id": "cel", "action": "celery", "payload": {"task": ADD}}, format="json"
    )
    assert ok.status_code == 201, ok.content


@pytest.mark.django_db
def test_the_admin_form_offers_the_registered_names_the_patterns_allow(settings: object) -> None:
    settings.TASKS_CELERY_TASKS = ["tests.effects.tasks.a*", "tests.effects.tasks.who*"]  # type: ignore[attr-defined]
    user = get_user_model().objects.create_superuser("root-admin", "a@example.com", "pw-1234567")
    client = Client()
    client.force_login(user)
    page = client.get("/admin/tasks_app/task/add/")
    assert page.status_code == 200
    schemas = page.context["action_schemas"]
    offered = schemas["celery"]["schema"]["properties"]["task"]["enum"]
    assert offered == [ADD, "tests.effects.tasks.whoami"]


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_on_a_real_worker_the_result_is_recorded_and_the_time_limit_applies(
    actions_worker: object, actions_queue: str
) -> None:
    add = services.task_create(
        id="add-w", action="celery", queue=actions_queue, payload={"task": ADD, "args": [20, 22]}
    )
    slow = services.task_create(
        id="nap-w",
        action="celery",
        queue=actions_queue,
        timeout_seconds=1,
        max_retries=0,
        payload={"task": "tests.effects.tasks.nap", "args": [30]},
    )
    runs = [services.task_execute(task=t) for t in (add, slow)]
    for run in runs:
        wait_until(lambda run=run: finished(run), timeout=30, message="the celery run")
    done, cut = runs
    assert done.status == RunStatus.COMPLETED and done.result == {"sum": 42}
    assert done.worker  # a worker ran it, not this process
    assert cut.status == RunStatus.FAILED and "timed out" in cut.error
    assert (cut.finished_at - cut.started_at).total_seconds() < 10
