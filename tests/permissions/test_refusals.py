"""What a refused user is told, by each way in, and that the services themselves refuse."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.models import Run, Task
from tasks_app.services import permissions

pytestmark = pytest.mark.django_db


def make_user(username: str, *codenames: str) -> User:
    user = User.objects.create_user(username=username, password="pw-not-used-12345")
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="tasks_app", codename__in=codenames)
    )
    return User.objects.get(pk=user.pk)


def test_the_service_refuses_a_user_and_writes_nothing() -> None:
    editor = make_user("editor", "view_task", "add_task", "change_task")
    task = services.task_create(id="daily", action="noop")
    with pytest.raises(permissions.OperationNotPermitted) as info:
        services.task_execute(task=task, by=editor)
    assert str(info.value) == "execute needs tasks_app.add_run, which editor does not hold"
    with pytest.raises(permissions.OperationNotPermitted):
        services.task_create_with_run(
            id="reminder", by=editor, fields={"action": "noop"}, delay_seconds=0
        )
    assert list(Task.objects.values_list("pk", flat=True)) == ["daily"]
    assert not Run.objects.exists()
    # A name is who acts for beat, the system and the trusted CLI operator: not checked.
    assert services.task_execute(task=task, by="cli:ops").task_id == "daily"


def test_a_delay_on_create_checks_the_action_too() -> None:
    """A task made with its run in one call is refused for an action the user may not use,
    though the user holds every model permission."""
    everything = [f"{v}_{m}" for v in ("view", "add", "change", "delete") for m in ("task", "run")]
    user = make_user("most", *everything)
    with pytest.raises(permissions.ActionNotPermitted):
        services.task_create_with_run(
            id="cmd",
            by=user,
            fields={"action": "command", "payload": {"command": "check"}},
            delay_seconds=60,
        )
    assert not Task.objects.exists()


def test_api_names_the_missing_permission() -> None:
    client = APIClient()
    client.force_authenticate(make_user("viewer", "view_task", "view_run"))
    services.task_create(id="daily", action="noop")
    response = client.post("/api/tasks/daily/execute")
    assert response.status_code == 403
    assert response.json() == {
        "error": "You do not have permission to perform this action: "
        "execute needs tasks_app.add_run.",
        "detail": {"permission": ["execute needs tasks_app.add_run"]},
    }
    assert not Run.objects.exists()


def test_head_and_options_need_what_get_needs() -> None:
    client = APIClient()
    client.force_authenticate(make_user("nobody"))
    task = services.task_create(id="daily", action="noop")
    services.task_execute(task=task)
    for method in ("get", "head", "options"):
        response = getattr(client, method)("/api/tasks/daily/runs?status=failed")
        assert response.status_code == 403, method
        if method != "head":  # a HEAD answer has no body; the others name what is missing
            assert "tasks_app.view_task" in response.json()["error"]


def test_cli_prune_as_a_user_answers_in_one_line() -> None:
    make_user("viewer", "view_task", "view_run")
    with pytest.raises(CommandError) as info:
        call_command("tasks", "prune", "--as", "viewer", stdout=StringIO())
    assert info.value.returncode == 1
    assert str(info.value) == (
        "permission denied: prune needs tasks_app.delete_run, which viewer does not hold"
    )
    User.objects.create_superuser("boss", "boss@example.com", "pw-not-used-12345")
    out = StringIO()
    call_command("tasks", "prune", "--as", "boss", stdout=out)
    assert out.getvalue().startswith("deleted 0 runs")
