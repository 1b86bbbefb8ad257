"""The missed-run alarm: raised when a fire has not completed in time, cleared by a completion."""

import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from tasks_app import services
from tasks_app.beat import alarms
from tasks_app.models import Run, RunStatus, Task, TaskState, Trigger

pytestmark = pytest.mark.django_db


def watched_task(**extra: object) -> Task:
    return services.task_create(
        id="heartbeat",
        action="noop",
        schedule_type="interval",
        interval_seconds=60,
        alert_after_seconds=30,
        **extra,
    )


def fire(task: Task, at, status: str) -> Run:  # type: ignore[no-untyped-def]
    return Run.objects.create(
        task=task, trigger=Trigger.SCHEDULE, status=status, scheduled_for=at, due_at=at
    )


def test_a_fire_that_did_not_complete_raises_the_alarm_and_a_completion_clears_it(caplog) -> None:
    task = watched_task()
    now = timezone.now()
    fire(task, now - timedelta(seconds=45), RunStatus.QUEUED)  # no worker picked it up
    with caplog.at_level(logging.ERROR, logger="tasks_app.services.alarms"):
        assert alarms.alarms_check(now=now) == (1, 0)
    state = task.load_state()
    assert state.alarm_since == now and "has not completed within 30 s" in state.alarm_note
    assert any("missed-run alarm for task heartbeat" in r.message for r in caplog.records)
    assert alarms.alarms_check(now=now) == (0, 0)  # raised once, not on every tick

    fire(task, now - timedelta(seconds=5), RunStatus.COMPLETED)
    assert alarms.alarms_check(now=now) == (0, 1)
    state = task.load_state()
    assert state.alarm_since is None and state.alarm_note == ""


def test_a_fire_still_inside_its_allowance_is_not_an_alarm() -> None:
    task = watched_task()
    now = timezone.now()
    fire(task, now - timedelta(seconds=10), RunStatus.RUNNING)
    assert alarms.alarms_check(now=now) == (0, 0)


def test_beat_not_recording_fires_at_all_raises_the_alarm() -> None:
    task = watched_task()
    TaskState.objects.filter(pk=task.pk).update(next_run_at=timezone.now() - timedelta(minutes=5))
    assert alarms.alarms_check(now=timezone.now()) == (1, 0)


def test_pausing_drops_the_alarm() -> None:
    task = watched_task()
    fire(task, timezone.now() - timedelta(minutes=2), RunStatus.FAILED)
    alarms.alarms_check(now=timezone.now())
    services.task_pause(task=Task.objects.get(pk=task.pk), note="known outage")
    alarms.alarms_check(now=timezone.now())
    assert TaskState.objects.get(pk=task.pk).alarm_since is None
