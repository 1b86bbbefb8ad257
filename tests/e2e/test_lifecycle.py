"""End to end: real ``celery worker`` and ``celery beat`` processes, real Postgres and RabbitMQ."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tasks_app import services
from tasks_app.models import Run, RunStatus, Task, TaskStatus
from tasks_app.observability import metrics
from tests.processes import wait_for_beat_after, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def finished(run: Run) -> Run | None:
    run.refresh_from_db()
    return (
        run if run.status not in (RunStatus.PENDING, RunStatus.QUEUED, RunStatus.RUNNING) else None
    )


def test_delayed_run_waits_then_completes_on_time(worker) -> None:
    task = services.task_create(id="reminder-001", action="echo", payload={"message": "hello"})
    run = services.task_schedule_once(task=task, delay_seconds=3)
    run.refresh_from_db()
    assert run.status in (RunStatus.PENDING, RunStatus.QUEUED)
    assert finished(run) is None
    task.refresh_from_db()
    assert task.state.status == TaskStatus.PENDING and task.state.next_run_at == run.due_at

    wait_until(lambda: finished(run), timeout=15, message="the delayed run to finish")
    assert run.status == RunStatus.COMPLETED
    assert run.output == "hello"
    assert run.started_at >= run.due_at  # never early
    assert (run.started_at - run.due_at).total_seconds() < 1
    assert run.lateness_ms is not None and 0 <= run.lateness_ms < 1000
    task.refresh_from_db()
    assert task.state.status == TaskStatus.COMPLETED and task.state.next_run_at is None


def test_failing_action_records_error_and_traceback(worker) -> None:
    task = services.task_create(id="broken", action="fail", payload={"message": "disk full"})
    run = services.task_execute(task=task)
    wait_until(lambda: finished(run), timeout=15, message="the failing run to finish")
    assert run.status == RunStatus.FAILED
    assert "disk full" in run.error
    assert "Traceback (most recent call last)" in run.error
    task.refresh_from_db()
    assert task.state.status == TaskStatus.FAILED


def test_interval_schedule_fires_on_time_once_per_instant(worker, beat_factory) -> None:
    # Beat first: the task's first fire is 2 s after it is created, and a beat that takes
    # longer to start records that fire late (within TASKS_MISFIRE_GRACE_SECONDS), which
    # says nothing about how on time a running beat fires.
    beat = beat_factory()
    wait_for_beat_after(timezone.now())
    task = services.task_create(
        id="every-2s", action="noop", schedule_type="interval", interval_seconds=2
    )
    completed = Run.objects.filter(task=task, status=RunStatus.COMPLETED)
    wait_until(lambda: completed.count() >= 4, timeout=30, message="four fires")
    beat.stop()
    unfinished = Run.objects.filter(task=task, status__in=[RunStatus.QUEUED, RunStatus.RUNNING])
    wait_until(lambda: not unfinished.exists(), timeout=15, message="the last fires to finish")
    runs = list(completed.order_by("scheduled_for"))
    instants = [r.scheduled_for for r in runs]
    # Once per instant, every 2 s, none left out.
    assert all(b - a == timedelta(seconds=2) for a, b in zip(instants, instants[1:])), instants
    assert all(r.started_at >= r.due_at for r in runs)
    assert max(r.lateness_ms for r in runs) < 1000
    tick = metrics.beat_tick_duration_get()  # what /metrics exports as the tick duration
    assert tick is not None and 0 < tick < 5


def test_pause_stops_fires_and_resume_starts_them_again(worker, beat_factory) -> None:
    task = services.task_create(
        id="pausable", action="noop", schedule_type="interval", interval_seconds=1
    )
    beat_factory()
    wait_until(
        lambda: Run.objects.filter(task=task, status=RunStatus.COMPLETED).count() >= 2,
        timeout=15,
        message="two fires",
    )
    services.task_pause(task=task, note="maintenance", by="ops")
    paused_at = timezone.now()
    unfinished = Run.objects.filter(task=task, status__in=[RunStatus.QUEUED, RunStatus.RUNNING])
    # A fire already claimed before the pause may still finish.
    wait_until(lambda: not unfinished.exists(), timeout=15, message="running fires to finish")
    count_at_pause = Run.objects.filter(task=task).count()
    wait_for_beat_after(paused_at + timedelta(seconds=3))  # three fires' worth of ticks
    assert Run.objects.filter(task=task).count() == count_at_pause
    assert Task.objects.get(pk=task.pk).state.status == TaskStatus.PAUSED

    services.task_resume(task=Task.objects.get(pk=task.pk), by="ops")
    wait_until(
        lambda: (
            Run.objects.filter(task=task, status=RunStatus.COMPLETED).count() >= count_at_pause + 2
        ),
        timeout=15,
        message="fires after resume",
    )
