"""Run lists as the API and the CLI filter them (one selector for both)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tasks_app import selectors, services
from tasks_app.models import Run, RunStatus, Trigger
from tests.stored_rows import run_set

pytestmark = pytest.mark.django_db


def test_run_list_filters_by_task_status_trigger_action_and_due_range() -> None:
    echo = services.task_create(id="echo-task", action="echo", payload={"message": "x"})
    noop = services.task_create(id="noop-task", action="noop")
    soon = services.task_schedule_once(task=echo, delay_seconds=600)
    later = services.task_schedule_once(task=echo, delay_seconds=1200)
    other = services.task_schedule_once(task=noop, delay_seconds=900)
    services.run_cancel(run=later)

    def ids(**filters):  # type: ignore[no-untyped-def]
        return [r.id for r in selectors.run_list(**filters)]

    assert ids() == [later.id, other.id, soon.id]  # newest due first
    assert ids(task="echo-task") == [later.id, soon.id]
    assert ids(status=[RunStatus.CANCELLED]) == [later.id]
    assert ids(trigger=[Trigger.DELAY], action="noop") == [other.id]
    cut = timezone.now() + timedelta(seconds=1000)
    assert ids(due_before=cut) == [other.id, soon.id]
    assert ids(due_after=cut) == [later.id]
    with pytest.raises(TypeError, match="unknown filters"):
        selectors.run_list(next_run_after=cut)


def test_dead_runs_are_failed_or_expired_and_not_retried_since() -> None:
    task = services.task_create(id="dead", action="noop")
    run = services.task_schedule_once(task=task, delay_seconds=600)
    run_set(run.pk, status=RunStatus.FAILED)
    assert [r.id for r in selectors.run_list(dead=True)] == [run.id]
    retry = services.run_retry(run=Run.objects.get(pk=run.pk))
    assert list(selectors.run_list(dead=True)) == []
    assert [r.id for r in selectors.run_attempts(run=retry)] == [run.id, retry.id]
