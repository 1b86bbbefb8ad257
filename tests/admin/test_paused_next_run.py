"""A paused task's next run reads the same in the admin list, the task page, the REST API and
the CLI: none, while paused; its preview says the fires come only after a resume."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from tasks_app import services
from tasks_app.models import Task

pytestmark = pytest.mark.django_db


def cli(*args: str) -> str:
    out = StringIO()
    call_command("tasks", *args, stdout=out)
    return out.getvalue()


def test_a_paused_tasks_next_run_is_none_everywhere(operator) -> None:
    task = services.task_create(
        id="nightly", action="noop", schedule_type="interval", interval_seconds=60
    )
    assert Task.objects.get(id="nightly").state.next_run_at is not None
    assert json.loads(cli("get", "nightly", "--json"))["next_run_at"] is not None
    services.task_pause(task=Task.objects.get(id=task.id), note="maintenance")
    # The stored next fire stays (resuming recomputes it); no view shows it as to come.
    assert Task.objects.get(id="nightly").state.next_run_at is not None

    assert json.loads(cli("get", "nightly", "--json"))["next_run_at"] is None
    assert "none while paused (resume to continue)" in cli("get", "nightly")
    row = next(line for line in cli("list").splitlines() if line.startswith("nightly"))
    assert row.split("  ")[-1].strip() == "none: paused"

    listing = operator.get(reverse("admin:tasks_app_task_changelist")).content.decode()
    assert "none: paused" in listing
    page = operator.get(reverse("admin:tasks_app_task_change", args=["nightly"])).content.decode()
    assert "none while paused (resume to continue)" in page
    assert "paused: these fires come only once it is resumed" in page

    services.task_resume(task=Task.objects.get(id="nightly"))
    assert json.loads(cli("get", "nightly", "--json"))["next_run_at"] is not None
    row = next(line for line in cli("list").splitlines() if line.startswith("nightly"))
    assert "none" not in row and row.split("  ")[-1].strip().startswith("in ")


def test_the_task_page_says_what_its_status_means(operator) -> None:
    services.task_create(id="by-hand", action="noop")
    page = operator.get(reverse("admin:tasks_app_task_change", args=["by-hand"])).content.decode()
    assert "no run has ended yet and none is waiting" in page
    listing = operator.get(reverse("admin:tasks_app_task_changelist")).content.decode()
    assert 'title="no run has ended yet and none is waiting">created<' in listing
