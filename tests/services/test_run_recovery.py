"""The sweep's writes: overdue runs expire (with the same error as at claim time), runs of a
vanished worker are interrupted (or failed past their time limit), runs whose message was lost go back to pending."""

from datetime import UTC, timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from tasks_app import services
from tasks_app.beat.sweep_writes import run_expire_overdue, run_fail_stalled, run_requeue_lost
from tasks_app.models import Run, RunStatus, Task, TaskStatus, Trigger
from tasks_app.worker.lease_writes import run_renew_leases
from tests.stored_rows import run_set

pytestmark = pytest.mark.django_db


def stored_run(task: Task, **fields) -> Run:  # type: ignore[no-untyped-def]
    now = timezone.now()
    run = services.run_create(
        task=task, trigger=Trigger.API, due_at=now + timedelta(hours=1), now=now
    )
    run_set(run.pk, **fields)
    return Run.objects.get(pk=run.pk)


def test_overdue_waiting_runs_expire_in_batches_and_their_task_fails() -> None:
    task = services.task_create(id="overdue", action="noop")
    now = timezone.now()
    deadline = now - timedelta(seconds=5)
    overdue = [stored_run(task, expires_at=deadline) for _ in range(5)]
    fresh = stored_run(task, expires_at=now + timedelta(hours=2))
    assert run_expire_overdue(now=now, batch=2) == 5
    stamp = deadline.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    for run in overdue:
        stored = Run.objects.get(pk=run.pk)
        assert (stored.status, stored.error) == (
            RunStatus.EXPIRED,
            f"expired: could not start by {stamp}",
        )
    assert Run.objects.get(pk=fresh.pk).status == RunStatus.PENDING
    task.refresh_from_db()
    # The fresh run still waits: the task shows it.
    assert task.state.next_run_at == fresh.due_at


@override_settings(TASKS_STALL_SECONDS=60)
def test_a_run_whose_lease_lapsed_is_interrupted_and_one_past_its_limit_fails() -> None:
    now = timezone.now()
    old = now - timedelta(seconds=120)
    lost_task = services.task_create(id="lost", action="noop")  # max_retries 0
    slow_task = services.task_create(id="slow", action="noop", timeout_seconds=60)
    alive_task = services.task_create(id="alive", action="noop")
    lost = stored_run(
        lost_task, status=RunStatus.RUNNING, started_at=old, heartbeat_at=old, worker="w1"
    )
    timed_out = stored_run(slow_task, status=RunStatus.RUNNING, started_at=old, heartbeat_at=old)
    alive = stored_run(alive_task, status=RunStatus.RUNNING, started_at=old, heartbeat_at=now)
    assert {r.pk for r in run_fail_stalled(now=now)} == {lost.pk, timed_out.pk}
    # Its worker vanished: an interruption, retried although max_retries is 0.
    stored = Run.objects.get(pk=lost.pk)
    assert stored.status == RunStatus.INTERRUPTED
    assert stored.error == (
        "interrupted (1 of at most 3): worker lost: w1 stopped renewing the run's lease 120 s ago"
    )
    again = Run.objects.get(first_attempt=lost.pk)
    assert (again.attempt, again.interruptions, again.trigger) == (2, 1, Trigger.RETRY)
    # Past its time limit as well: the task's failure, by its retry policy.
    stored = Run.objects.get(pk=timed_out.pk)
    assert stored.status == RunStatus.FAILED
    assert stored.error.startswith("timed out after 60 s")
    assert Task.objects.get(pk=slow_task.pk).state.status == TaskStatus.FAILED
    assert Run.objects.get(pk=alive.pk).status == RunStatus.RUNNING


@override_settings(TASKS_REQUEUE_AFTER_SECONDS=120, TASKS_QUEUES=["idle-queue", "busy-queue"])
def test_runs_queued_long_past_their_due_time_go_back_to_pending_in_idle_queues_only() -> None:
    now = timezone.now()
    old = now - timedelta(seconds=600)
    lost_task = services.task_create(id="lost", action="noop", queue="idle-queue")
    busy_task = services.task_create(id="busy", action="noop", queue="busy-queue")
    lost = stored_run(lost_task, status=RunStatus.QUEUED, queued_at=old, due_at=old)
    waiting = stored_run(busy_task, status=RunStatus.QUEUED, queued_at=old, due_at=old)
    recent = stored_run(lost_task, status=RunStatus.QUEUED, queued_at=now, due_at=now)
    assert run_requeue_lost(now=now, queues=["idle-queue"]) == 1
    statuses = dict(Run.objects.values_list("id", "status"))
    assert statuses[lost.pk] == RunStatus.PENDING
    assert statuses[waiting.pk] == RunStatus.QUEUED
    assert statuses[recent.pk] == RunStatus.QUEUED


def test_a_lease_is_lost_only_when_the_held_run_was_interrupted_after_its_claim() -> None:
    """The renewal tells a worker process which of its runs went to another worker while it
    stood still (the pool process then stops its action); a run it finished itself, one it
    never claimed, and a redelivery of a run interrupted before it took the message are not
    losses."""
    task = services.task_create(id="leases", action="noop")
    now = timezone.now()
    held_since = now - timedelta(seconds=30)
    before = held_since - timedelta(seconds=60)
    running = stored_run(task, status=RunStatus.RUNNING, started_at=held_since, worker="w1")
    taken = stored_run(task, status=RunStatus.INTERRUPTED, started_at=held_since, worker="w1")
    redelivered = stored_run(task, status=RunStatus.INTERRUPTED, started_at=before, worker="w0")
    finished = stored_run(task, status=RunStatus.COMPLETED, started_at=held_since, worker="w1")
    unclaimed = stored_run(task, status=RunStatus.QUEUED)
    held = {str(r.pk): held_since for r in (running, taken, redelivered, finished, unclaimed)}
    assert run_renew_leases(held=held, now=now) == [str(taken.pk)]
    assert Run.objects.get(pk=running.pk).heartbeat_at == now
    assert Run.objects.get(pk=finished.pk).heartbeat_at is None
