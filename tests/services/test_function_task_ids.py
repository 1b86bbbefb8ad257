"""A ``@task`` function's task id is the function's: a person's task (API, admin, CLI, a
declared schedule) cannot take it, so a task made before the function's first enqueue
cannot make every ``.enqueue()`` and ``enqueue_many`` of it fail; the refusal names the
function. The function's own task (action ``django_task`` calling it) may be made by hand."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from tasks_app.django_tasks import enqueue_many
from tasks_app.models import Run, Task
from tasks_app.schedules.sync import SchedulesError, schedules_sync
from tasks_app.services.tokens import token_create
from tests.django_tasks import functions
from tests.shared import form as task_form
from tests.stored_rows import counts

pytestmark = pytest.mark.django_db

FUNCTION = "tests.django_tasks.functions.add"
WHOSE = f"is the id of the task of the @task function {FUNCTION}"


def api_of(*codenames: str, superuser: bool = False) -> APIClient:
    user = User.objects.create_user("clerk", password="pw-Clerk-2026", is_superuser=superuser)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user).token}")
    return client


def enqueues_still_work() -> None:
    result = functions.add.enqueue(1, 2)
    assert Run.objects.get(pk=result.id).task_id == FUNCTION
    assert len(enqueue_many(functions.add, [((3, 4), {}), ((5, 6), {})])) == 2


def test_a_person_with_add_task_cannot_take_a_functions_id_through_the_api() -> None:
    api = api_of("add_task", "view_task")
    before = counts()
    response = api.post("/api/tasks", {"id": FUNCTION, "action": "echo"}, format="json")
    assert response.status_code == 400, response.content
    assert any(WHOSE in m for m in response.json()["detail"]["id"]), response.json()
    assert counts() == before
    enqueues_still_work()


def test_the_cli_refuses_a_functions_id_naming_the_function() -> None:
    with pytest.raises(CommandError) as info:
        call_command("tasks", "create", FUNCTION, "--action", "noop", stdout=StringIO())
    assert str(info.value).startswith("id: ") and WHOSE in str(info.value)
    assert not Task.objects.filter(pk=FUNCTION).exists()
    enqueues_still_work()


def test_the_admin_form_refuses_a_functions_id_next_to_the_field(client: Client) -> None:
    client.force_login(User.objects.create_superuser("boss", "b@example.com", "pw-Boss-2026"))
    response = client.post(reverse("admin:tasks_app_task_add"), task_form(id=FUNCTION))
    assert response.status_code == 200, "the form was accepted"
    errors = response.context["adminform"].form.errors
    assert any(WHOSE in m for m in errors["id"]), errors
    enqueues_still_work()


def test_a_declared_schedule_cannot_take_a_functions_id() -> None:
    with pytest.raises(SchedulesError, match="choose another id"):
        schedules_sync("tests.django_tasks.squatting_schedules")
    assert not Task.objects.filter(pk=FUNCTION).exists()
    enqueues_still_work()


def test_the_functions_task_cannot_be_turned_into_another_action_after_its_first_enqueue() -> None:
    functions.add.enqueue(1, 2)
    api = api_of(superuser=True)  # a stored django_task: changing it needs its permission too
    response = api.patch(f"/api/tasks/{FUNCTION}", {"action": "echo"}, format="json")
    assert response.status_code == 400 and WHOSE in response.json()["detail"]["id"][0]
    enqueues_still_work()


def test_the_functions_own_task_may_be_made_by_hand_before_its_first_enqueue(settings) -> None:
    settings.TASKS_DJANGO_TASKS = ["tests.django_tasks.functions.*"]
    call_command(
        "tasks",
        "create",
        FUNCTION,
        "--action",
        "django_task",
        "--payload",
        f'{{"task": "{FUNCTION}"}}',
        "--max-retries",
        "3",
        stdout=StringIO(),
    )
    enqueues_still_work()
    assert Task.objects.get(pk=FUNCTION).max_retries == 3


def test_an_id_that_names_no_function_is_anyones() -> None:
    api = api_of("add_task", "view_task")
    for free in ("tests.django_tasks.functions.QuotaExceeded", "reports.daily", "os.path.join"):
        response = api.post("/api/tasks", {"id": free, "action": "noop"}, format="json")
        assert response.status_code == 201, response.content
