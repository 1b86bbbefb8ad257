"""Overlap policies, auto-pause and the missed-run alarm with real worker and beat processes."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from tasks_app import services
from tasks_app.beat import alarms, firing
from tasks_app.models import Run, RunStatus, Task, TaskState
from tests.processes import wait_for_beat_after, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def intervals(task: Task) -> list[tuple]:  # type: ignore[type-arg]
    return sorted(
        (r.started_at, r.finished_at or timezone.now())
        for r in Run.objects.filter(task=task, started_at__isnull=False)
    )


def test_overlap_skip_never_runs_two_at_once(worker, beat_factory) -> None:
    task = services.task_create(
        id="slow-skip",
        action="sleep",
        payload={"seconds": 3},
        schedule_type="interval",
        interval_seconds=1,
        overlap_policy="skip",
    )
    beat = beat_factory()
    wait_until(
        lambda: Run.objects.filter(task=task, status=RunStatus.COMPLETED).count() >= 2,
        timeout=30,
        message="two completed runs",
    )
    services.task_pause(task=Task.objects.get(pk=task.pk), note="end of test")
    beat.stop()
    wait_until(
        lambda: not Run.objects.filter(task=task, status=RunStatus.RUNNING).exists(),
        timeout=10,
        message="the last run to finish",
    )
    spans = intervals(task)
    assert all(earlier[1] <= later[0] for earlier, later in zip(spans, spans[1:], strict=False)), (
        spans
    )
    skipped = Run.objects.filter(
        task=task, status=RunStatus.SKIPPED, error__contains="still running"
    )
    assert skipped.count() >= 2
    assert (
        len(set(Run.objects.filter(task=task).values_list("scheduled_for", flat=True)))
        == Run.objects.filter(task=task).count()
    )  # every fire recorded once, skipped ones too


def test_overlap_buffer_one_keeps_at_most_one_waiting(worker, beat_factory) -> None:
    task = services.task_create(
        id="slow-buffer",
        action="sleep",
        payload={"seconds": 2.5},
        schedule_type="interval",
        interval_seconds=1,
        overlap_policy="buffer_one",
    )
    beat_factory()
    # A run told to wait goes back to ``pending`` (beat offers it again each tick); a fire
    # still in flight to its claim is ``queued`` and not yet decided, so only ``pending``
    # runs count as waiting (counting ``queued`` ones past due measured the claim's latency).
    most_waiting: list[tuple] = []  # type: ignore[type-arg]
    deadline = time.monotonic() + 12
    while time.monotonic() < deadline:
        waiting = list(
            Run.objects.filter(
                task=task, status=RunStatus.PENDING, due_at__lte=timezone.now()
            ).values_list("id", "due_at")
        )
        if len(waiting) > len(most_waiting):
            most_waiting = waiting
        time.sleep(0.1)
    services.task_pause(task=Task.objects.get(pk=task.pk), note="end of test")
    assert len(most_waiting) == 1, (
        "one run should have waited behind the running one, never more",
        most_waiting,
    )
    spans = intervals(task)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert Run.objects.filter(task=task, status=RunStatus.SKIPPED).exists()
    assert Run.objects.filter(task=task, status=RunStatus.COMPLETED).count() >= 3


def test_task_pauses_itself_after_three_consecutive_failures(worker, beat_factory) -> None:
    task = services.task_create(
        id="flaky",
        action="fail",
        payload={"message": "upstream down"},
        schedule_type="interval",
        interval_seconds=1,
        pause_after_failures=3,
    )
    beat_factory()
    wait_until(lambda: Task.objects.get(pk=task.pk).paused, timeout=30, message="auto-pause")
    state = task.load_state()
    assert state.paused_by == "system"
    assert "auto-paused after 3 consecutive failures" in state.pause_note
    assert "upstream down" in state.pause_note
    # Three fires' worth of ticks after the pause: nothing more started. (A fire claimed
    # before the pause landed may still finish: on a slow machine a fourth run can be
    # running while the third failure pauses the task.)
    wait_for_beat_after(timezone.now() + timedelta(seconds=3))
    failed = Run.objects.filter(task=task, status=RunStatus.FAILED)
    assert failed.count() >= 3
    assert not failed.filter(started_at__gt=state.paused_at).exists()
    assert not Run.objects.filter(
        task=task, status__in=[RunStatus.QUEUED, RunStatus.RUNNING]
    ).exists()
    services.task_resume(task=task, by="ops")
    assert Task.objects.get(pk=task.pk).state.consecutive_failures == 0


def test_alarm_fires_while_no_worker_runs_and_clears_after_a_completed_run(
    extra_queue, worker_factory
) -> None:
    queue = extra_queue  # no worker consumes it yet
    task = services.task_create(
        id="nightly-report",
        action="noop",
        schedule_type="interval",
        interval_seconds=2,
        alert_after_seconds=2,
        queue=queue,
    )
    # Record its fires the way beat does.
    wait_until(
        lambda: firing.schedule_fire_due(now=timezone.now(), lookahead=timedelta(0)),
        timeout=10,
        message="a fire",
    )
    # Raised once the fire is alert_after_seconds (2 s) overdue.
    wait_until(lambda: alarms.alarms_check(now=timezone.now())[0] == 1, timeout=10, message="alarm")
    assert task.load_state().alarm_since is not None

    worker_factory(TASKS_DEFAULT_QUEUE=queue)  # the worker comes back, runs the waiting fire
    wait_until(
        lambda: Run.objects.filter(task=task, status=RunStatus.COMPLETED).exists(),
        timeout=20,
        message="the fire to complete",
    )
    firing.schedule_fire_due(now=timezone.now(), lookahead=timedelta(0))
    wait_until(
        lambda: (
            alarms.alarms_check(now=timezone.now())[1] == 1
            or TaskState.objects.get(pk=task.pk).alarm_since is None
        ),
        timeout=10,
        message="clear",
    )
    assert TaskState.objects.get(pk=task.pk).alarm_since is None


def test_max_runs_completes_the_task_after_exactly_three(worker, beat_factory) -> None:
    task = services.task_create(
        id="three-times", action="noop", schedule_type="interval", interval_seconds=1, max_runs=3
    )
    beat_factory()
    wait_until(
        lambda: Task.objects.get(pk=task.pk).state.status == "completed",
        timeout=20,
        message="the task to complete",
    )
    wait_for_beat_after(timezone.now() + timedelta(seconds=2))  # two more fires' worth
    task.refresh_from_db()
    assert Run.objects.filter(task=task).count() == 3
    assert Run.objects.filter(task=task, status=RunStatus.COMPLETED).count() == 3
    assert task.state.next_run_at is None and task.state.fire_count == 3
