"""The ``command`` action: allow-listed management commands, arguments, output cap."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from tasks_app import actions, services
from tasks_app.actions.command import run_command
from tasks_app.models import RunStatus, Task
from tests.actions.helpers import context, execute_in_process, finished
from tests.processes import wait_until

TEST_APP = "tests.actions.testapp"  # holds the test-only `print_bytes` command


def refused_payload(payload: dict[str, object]) -> str:
    with pytest.raises(ValidationError) as info:
        services.task_create(id="cmd", action="command", payload=payload)
    assert not Task.objects.filter(pk="cmd").exists()
    return " ".join(info.value.message_dict["payload"])


@pytest.mark.django_db
def test_command_not_on_the_allow_list_is_refused_when_saved() -> None:
    message = refused_payload({"command": "flush", "args": ["--noinput"]})
    assert "command 'flush' is not allowed" in message
    assert "TASKS_COMMAND_ALLOWLIST" in message and "clearsessions" in message
    assert "not allowed" in refused_payload({"command": "diffsettings"})  # would print secrets
    assert "not allowed" in refused_payload({"command": "shell", "args": "-c 'import os'"})


@pytest.mark.django_db
def test_unbalanced_quotes_are_refused_when_saved() -> None:
    assert "cannot be split into arguments" in refused_payload(
        {"command": "check", "args": "--tag 'models"}
    )


def test_allow_list_is_checked_again_at_run_time(settings: object) -> None:
    settings.TASKS_COMMAND_ALLOWLIST = ["check"]  # type: ignore[attr-defined]
    with pytest.raises(actions.ActionError, match="'showmigrations' is not allowed") as info:
        run_command({"command": "showmigrations"}, context())
    assert not info.value.retryable


def test_settings_and_pythonpath_options_cannot_load_other_code(tmp_path: object) -> None:
    # In-process, --settings/--pythonpath are parsed but never applied: no import happens.
    outcome = run_command(
        {
            "command": "check",
            "args": ["--settings", "evil_settings", "--pythonpath", str(tmp_path)],
        },
        context(),
    )
    assert isinstance(outcome, actions.Outcome)
    assert "System check identified no issues" in outcome.output


def test_bad_arguments_fail_without_retry() -> None:
    with pytest.raises(actions.ActionError, match="unrecognized arguments: --nope") as info:
        run_command({"command": "check", "args": "--nope"}, context())
    assert not info.value.retryable


@pytest.mark.django_db
def test_one_mebibyte_of_output_is_stored_as_64_kib_truncated(settings: object) -> None:
    settings.INSTALLED_APPS = [*settings.INSTALLED_APPS, TEST_APP]  # type: ignore[attr-defined]
    settings.TASKS_COMMAND_ALLOWLIST = ["print_bytes"]  # type: ignore[attr-defined]
    task = services.task_create(
        id="big-output",
        action="command",
        payload={"command": "print_bytes", "args": "--bytes 1048576"},
    )
    run = execute_in_process(services.task_execute(task=task))
    assert run.status == RunStatus.COMPLETED
    assert len(run.output.encode()) == 64 * 1024
    assert run.truncated is True
    assert run.result["output_bytes"] == 1024 * 1024  # what the command really wrote


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_allowed_command_runs_with_its_arguments_through_the_worker(
    actions_worker: object, actions_queue: str
) -> None:
    task = services.task_create(
        id="migrations",
        action="command",
        queue=actions_queue,
        payload={"command": "showmigrations", "args": "tasks_app --list"},
    )
    as_list = services.task_create(
        id="migrations-list",
        action="command",
        queue=actions_queue,
        payload={"command": "showmigrations", "args": ["django_celery_beat"]},
    )
    runs = [services.task_execute(task=task), services.task_execute(task=as_list)]
    for run in runs:
        wait_until(lambda run=run: finished(run), timeout=30, message="the command run")
        assert run.status == RunStatus.COMPLETED, run.error
        assert run.truncated is False
    first, second = runs
    # Only the app named in the arguments is listed, with its applied migration.
    assert first.output.startswith("tasks_app\n") and "[X] 0001_initial" in first.output
    assert "django_celery_beat" not in first.output
    assert second.output.startswith("django_celery_beat\n") and "tasks_app" not in second.output
    assert first.result == {
        "command": "showmigrations",
        "args": ["tasks_app", "--list"],
        "output_bytes": len(first.output.encode()),
    }
