"""Unique calls through ``manage.py tasks``: ``execute``/``schedule`` with ``--unique-key``,
``--unique-for`` and ``--replace``; a task's ``--unique-on``/``--debounce``; ``show``."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tasks_app.models import Run, RunStatus, Task

pytestmark = pytest.mark.django_db


def tasks(*args: str) -> str:
    out = StringIO()
    call_command("tasks", *args, stdout=out)
    return out.getvalue()


def test_a_duplicate_execute_prints_the_first_run_and_makes_none() -> None:
    tasks("create", "report", "--action", "noop")
    first = json.loads(tasks("execute", "report", "--unique-key", "invoice-7", "--json"))
    text = tasks("execute", "report", "--unique-key", "invoice-7")
    assert text.strip() == (
        f"run {first['id']} of report already holds key invoice-7 ({first['status']}): no new run"
    )
    assert Run.objects.filter(task_id="report").count() == 1
    shown = tasks("show", first["id"])
    assert "unique key    invoice-7" in shown


def test_replace_keeps_only_the_newest_call() -> None:
    tasks("create", "report", "--action", "noop")
    first = json.loads(tasks("schedule", "report", "--in", "10m", "--unique-key", "k", "--json"))
    second = json.loads(
        tasks("schedule", "report", "--in", "10m", "--unique-key", "k", "--replace", "--json")
    )
    assert second["id"] != first["id"]
    old = Run.objects.get(pk=first["id"])
    assert old.status == RunStatus.CANCELLED and second["id"] in old.error


def test_a_tasks_policy_from_the_command_line() -> None:
    tasks("create", "hook", "--action", "noop", "--unique-on", "order", "--unique-for", "2m")
    tasks("update", "hook", "--debounce")
    task = Task.objects.get(pk="hook")
    assert (task.unique_on, task.unique_for_seconds, task.debounce) == ("order", 120, True)
    with pytest.raises(CommandError, match="debounce: needs unique_on"):
        tasks("update", "hook", "--unique-on", "")
    tasks("update", "hook", "--no-debounce", "--unique-on", "", "--unique-for", "0")
    task.refresh_from_db()
    assert (task.unique_on, task.unique_for_seconds, task.debounce) == ("", 0, False)
