"""The ``django_task`` action: a ``@task`` function as a task's action, so it can be put on
an interval or cron schedule from the admin, the API or the CLI; checked when saved."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.models import Task
from tasks_app.services.tokens import token_create

pytestmark = pytest.mark.django_db
ADD = "tests.django_tasks.functions.add"


@pytest.fixture(autouse=True)
def _allowed(settings: Any) -> None:
    """The paths these tests name pass ``TASKS_DJANGO_TASKS``; what follows is checked by
    importing them (tests/actions/test_django_task_allowlist.py: what the setting refuses)."""
    settings.TASKS_DJANGO_TASKS = ["tests.django_tasks.*", "nowhere.*", "os.*"]


def refused_payload(payload: dict[str, object]) -> str:
    with pytest.raises(ValidationError) as info:
        services.task_create(id="dt", action="django_task", payload=payload)
    assert not Task.objects.filter(pk="dt").exists()
    return " ".join(info.value.message_dict["payload"])


def test_a_task_function_on_an_interval_is_saved_with_its_arguments_as_the_payload() -> None:
    task = services.task_create(
        id="sums",
        action="django_task",
        payload={"task": ADD, "args": [1], "kwargs": {"b": 2}},
        schedule_type="interval",
        interval_seconds=60,
    )
    assert task.state.next_run_at is not None  # on the schedule like any other action


def test_a_path_that_is_not_a_task_function_is_refused_when_saved() -> None:
    message = refused_payload({"task": "tests.django_tasks.functions.not_a_task"})
    assert "is not a function decorated with @task" in message
    assert "cannot import 'nowhere.at_all'" in refused_payload({"task": "nowhere.at_all"})
    assert "does not match" in refused_payload({"task": "os system"})  # not a dotted path


def test_arguments_that_do_not_fit_the_function_are_refused_when_saved() -> None:
    message = refused_payload({"task": ADD, "args": [1, 2, 3]})
    assert f"{ADD}(): too many positional arguments" in message
    assert "unexpected keyword argument 'c'" in refused_payload(
        {"task": ADD, "args": [1, 2], "kwargs": {"c": 3}}
    )


def test_the_api_answers_400_naming_the_payload() -> None:
    user = User.objects.create_superuser("dt-admin", password="not-used-here")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user).token}")
    answer = client.post(
        "/api/tasks",
        {"id": "dt-api", "action": "django_task", "payload": {"task": "os.getcwd"}},
        format="json",
    )
    assert answer.status_code == 400, answer.content
    assert "is not a function decorated with @task" in str(answer.json()["detail"]["payload"])
    assert not Task.objects.filter(pk="dt-api").exists()
