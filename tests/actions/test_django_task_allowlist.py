"""Which ``@task`` functions a person may choose for the ``django_task`` action
(``TASKS_DJANGO_TASKS``): checked before anything is imported, by the payload check, the save
and the run; the payload check first asks what the save would (the action's permission, add
or change). Enqueues from code are not governed: they work without the setting."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.models import Run, RunStatus, Task
from tests.actions.helpers import execute_in_process
from tests.django_tasks import functions

pytestmark = pytest.mark.django_db

CANARY = "tests.actions.import_canary"
PING = f"{CANARY}.ping"
CHECK_URL = "admin:tasks_app_task_payload_check"


@pytest.fixture(autouse=True)
def _not_imported(settings: Any) -> Iterator[None]:
    settings.TASKS_DJANGO_TASKS = []
    sys.modules.pop(CANARY, None)
    yield
    sys.modules.pop(CANARY, None)


def imported() -> bool:
    return CANARY in sys.modules


def staff(name: str, *codenames: str) -> User:
    user = User.objects.create_user(name, password=None, is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="tasks_app", codename__in=codenames)
    )
    return User.objects.get(pk=user.pk)


def check(user: User, path: str, **query: str) -> Any:
    client = Client()
    client.force_login(user)
    url = reverse(CHECK_URL) + (f"?task={query['task']}" if query else "")
    return client.post(url, {"action": "django_task", "payload": json.dumps({"task": path})})


@pytest.mark.parametrize(
    "codenames",
    [
        ("view_task",),  # a viewer
        ("view_task", "add_task", "change_task"),  # an editor without the action's permission
    ],
)
def test_the_payload_check_refuses_who_may_not_save_it_before_importing(
    codenames: tuple[str, ...], settings: Any
) -> None:
    settings.TASKS_DJANGO_TASKS = ["tests.*"]  # even where the allow-list admits the path
    user = staff("probe", *codenames)
    assert check(user, PING).status_code == 403
    services.task_create(id="t", action="noop")
    assert check(user, PING, task="t").status_code == 403
    assert not imported()


def test_a_path_outside_the_allow_list_is_refused_without_importing_it() -> None:
    root = User.objects.create_superuser("root", "root@example.com", None)
    answer = check(root, PING)
    assert answer.status_code == 200
    (message,) = answer.json()["errors"]
    assert "matches none of the allowed patterns" in message and "TASKS_DJANGO_TASKS" in message
    assert not imported()
    client = APIClient()
    client.force_authenticate(root)
    saved = client.post(
        "/api/tasks",
        {"id": "dt", "action": "django_task", "payload": {"task": PING}},
        format="json",
    )
    assert saved.status_code == 400 and "TASKS_DJANGO_TASKS" in json.dumps(saved.json())
    assert not imported() and not Task.objects.filter(pk="dt").exists()


def test_a_path_the_allow_list_admits_is_checked_saved_and_run(settings: Any) -> None:
    settings.TASKS_DJANGO_TASKS = ["tests.actions.*"]
    root = User.objects.create_superuser("root", "root@example.com", None)
    assert check(root, PING).json() == {"ok": True, "errors": []}
    assert imported()
    task = services.task_create(id="dt", action="django_task", payload={"task": PING}, by=root)
    run = execute_in_process(services.task_execute(task=task))
    assert run.status == RunStatus.COMPLETED and run.result == "pong"


def test_a_run_whose_path_the_allow_list_no_longer_admits_fails_without_importing(
    settings: Any,
) -> None:
    settings.TASKS_DJANGO_TASKS = ["tests.actions.*"]
    task = services.task_create(id="dt", action="django_task", payload={"task": PING})
    sys.modules.pop(CANARY, None)
    settings.TASKS_DJANGO_TASKS = ["billing.*"]
    run = execute_in_process(services.task_execute(task=task))
    assert run.status == RunStatus.FAILED and "TASKS_DJANGO_TASKS" in run.error
    assert not imported()


def test_enqueues_from_code_need_no_allow_list() -> None:
    result = functions.add.enqueue(2, 3)
    run = execute_in_process(Run.objects.get(pk=result.id))
    assert run.status == RunStatus.COMPLETED and run.result == {"sum": 5}


def test_a_person_who_edits_an_enqueued_task_is_held_to_the_allow_list() -> None:
    result = functions.add.enqueue(2, 3)
    task = Task.objects.get(runs__pk=result.id)
    with pytest.raises(ValidationError) as info:
        services.task_update(task=task, data={"payload": {"task": PING}}, by="cli:someone")
    assert "TASKS_DJANGO_TASKS" in " ".join(info.value.message_dict["payload"])
    assert not imported()


def test_an_operator_who_sets_a_functions_policies_leaves_its_calls_running() -> None:
    """Retries set on the function's task by a person change no function: its calls still
    run with the setting empty (the run is the function its task is named after)."""
    functions.add.enqueue(1, 1)
    task = Task.objects.get(pk="tests.django_tasks.functions.add")
    services.task_update(task=task, data={"max_retries": 3}, by="cli:operator")
    result = functions.add.enqueue(2, 3)
    run = execute_in_process(Run.objects.get(pk=result.id))
    assert run.status == RunStatus.COMPLETED and run.result == {"sum": 5}


def test_a_person_who_names_a_new_task_after_a_function_is_held_to_the_allow_list() -> None:
    with pytest.raises(ValidationError) as info:
        services.task_create(
            id=PING, action="django_task", payload={"task": PING}, by="cli:someone"
        )
    assert "TASKS_DJANGO_TASKS" in " ".join(info.value.message_dict["payload"])
    assert not imported()
