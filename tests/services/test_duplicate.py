"""Duplicating a task: the copy carries every user field, gets a free id, and a copy that
would fire on its own waits paused until someone resumes it."""

import pytest
from django.core.exceptions import ValidationError

from tasks_app import services
from tasks_app.models import Run, RunStatus, Task, TaskStatus

pytestmark = pytest.mark.django_db


def test_a_recurring_copy_keeps_every_field_and_starts_paused() -> None:
    task = services.task_create(
        id="report",
        name="Report",
        action="echo",
        payload={"message": "hi"},
        schedule_type="interval",
        interval_seconds=60,
        max_retries=3,
        jitter_seconds=5,
    )
    copy = services.task_duplicate(task=task, by="ops")
    assert copy.pk == "report-copy"
    assert (copy.name, copy.action, copy.payload, copy.interval_seconds, copy.max_retries) == (
        "Report (copy)",
        "echo",
        {"message": "hi"},
        60,
        3,
    )
    assert copy.jitter_seconds == 5
    stored = Task.objects.get(pk="report-copy")
    assert stored.paused and stored.state.status == TaskStatus.PAUSED
    assert stored.state.pause_note == "Duplicate of report: review, then resume."
    assert stored.state.paused_by == "ops"
    # Nothing of the copy will fire while paused; the original is untouched.
    assert not Run.objects.filter(task=stored, status=RunStatus.QUEUED).exists()
    task.refresh_from_db()
    assert not task.paused


def test_ids_count_up_and_an_explicit_id_is_used() -> None:
    task = services.task_create(id="ping", action="noop")
    assert services.task_duplicate(task=task).pk == "ping-copy"
    assert services.task_duplicate(task=task).pk == "ping-copy-2"
    named = services.task_duplicate(task=task, new_id="ping-eu")
    assert named.pk == "ping-eu"
    # An on-demand copy is ready at once.
    assert not named.paused and named.state.status == TaskStatus.CREATED


def test_a_taken_id_is_a_conflict_and_writes_nothing() -> None:
    task = services.task_create(id="ping", action="noop")
    services.task_create(id="other", action="noop")
    with pytest.raises(services.ConflictError):
        services.task_duplicate(task=task, new_id="other")
    with pytest.raises(ValidationError):
        services.task_duplicate(task=task, new_id="not a slug!")
    assert set(Task.objects.values_list("pk", flat=True)) == {"ping", "other"}


def test_a_long_id_is_shortened_to_fit() -> None:
    task = services.task_create(id="x" * 100, action="noop")
    copy = services.task_duplicate(task=task)
    assert len(copy.pk) <= 100 and copy.pk.endswith("-copy")
