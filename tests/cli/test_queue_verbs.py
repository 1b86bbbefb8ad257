"""``manage.py tasks queues``, ``pause-queue`` and ``resume-queue``: the table, the JSON the API
answers, a refusal as one line with exit status 1 and nothing written, and ``--as``."""

from __future__ import annotations

import json
import re

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User

from tasks_app import services
from tasks_app.models import QueuePause, Run, RunStatus
from tests.shared import cli

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def queue() -> str:
    return str(settings.CELERY_TASK_DEFAULT_QUEUE)


def test_pause_list_and_resume_from_the_command_line(queue: str) -> None:
    task = services.task_create(id="cli-held", action="noop")
    paused = cli("pause-queue", queue, "--note", "mail relay down")
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout.strip() == f"paused queue {queue}; 0 run(s) waiting"

    ran = cli("execute", task.pk)
    assert ran.returncode == 0, ran.stderr
    assert f"waits: queue {queue} is paused" in ran.stdout
    assert Run.objects.get(task=task).status == RunStatus.PENDING

    table = cli("queues")
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split() == ["QUEUE", "STATE", "WAITING", "PAUSED", "BY", "NOTE"]
    row = next(r for r in rows if r.startswith(f"{queue} "))
    assert re.match(rf"{re.escape(queue)}\s+paused\s+1\s+.+\s+cli:\S+\s+mail relay down$", row), row

    listed = json.loads(cli("queues", "--json").stdout)
    mine = next(q for q in listed if q["name"] == queue)
    assert (mine["paused"], mine["note"], mine["waiting_runs"]) == (True, "mail relay down", 1)

    resumed = cli("resume-queue", queue)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == f"resumed queue {queue}; waiting runs released"
    assert not QueuePause.objects.exists()
    assert Run.objects.get(task=task).status == RunStatus.QUEUED  # released by the resume
    again = cli("resume-queue", queue)
    assert (again.returncode, again.stdout.strip()) == (0, f"queue {queue} was not paused")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("pause-queue", "no-such-queue"),
            "CommandError: queue: 'no-such-queue' is not a configured queue",
        ),
        (("pause-queue", "a/b"), "CommandError: queue: No spaces, '/'"),
        (
            ("resume-queue", "no-such-queue"),
            "CommandError: queue: 'no-such-queue' is not a configured queue",
        ),
        (
            ("pause-queue", "{queue}", "--note", "x" * 2001),
            "CommandError: note: must be at most 2,000",
        ),
    ],
)
def test_bad_input_is_one_line_exit_1_and_nothing_written(
    queue: str, args: tuple[str, ...], message: str
) -> None:
    done = cli(*(a.format(queue=queue) for a in args))
    assert done.returncode == 1
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith(message), done.stderr
    assert not QueuePause.objects.exists()


def test_a_verb_without_its_name_is_a_usage_error(queue: str) -> None:
    done = cli("pause-queue")
    assert done.returncode == 2 and "name" in done.stderr


def test_as_a_user_without_the_pauses_permissions_it_is_refused(queue: str) -> None:
    editor = User.objects.create_user("editor")
    editor.user_permissions.set(
        Permission.objects.filter(codename__in=["view_task", "change_task"])
    )
    done = cli("pause-queue", queue, "--as", "editor")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "CommandError: permission denied: pause-queue needs tasks_app.view_queuepause, "
        "tasks_app.add_queuepause, which editor does not hold"
    )
    assert not QueuePause.objects.exists()
