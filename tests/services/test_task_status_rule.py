"""One rule for a task's status (tasks_app_task_status in tasks_app/store/schema.sql): after
a run, an expiry, the end of its schedule, a pause and resume, or an edit that syncs its
schedule, the task tells the same thing — and a sync racing a run's end loses neither."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from tasks_app import services
from tasks_app.beat import firing
from tasks_app.beat.sweep_writes import run_expire_overdue
from tasks_app.models import Run, RunStatus, Task, TaskStatus, Trigger
from tasks_app.worker import run_execution
from tests.processes import wait_until
from tests.stored_rows import run_set


def status(task: Task) -> str:
    return str(task.load_state().status)


def waiting_run_past_its_deadline(task: Task, run_status: str) -> Run:
    now = timezone.now()
    run = services.run_create(
        task=task, trigger=Trigger.API, due_at=now + timedelta(hours=1), now=now
    )
    run_set(run.pk, status=run_status)
    run_set(run.pk, due_at=now - timedelta(minutes=2), expires_at=now - timedelta(minutes=1))
    return run


def expire_by_the_sweep(task: Task) -> None:
    waiting_run_past_its_deadline(task, RunStatus.PENDING)
    assert run_expire_overdue(now=timezone.now()) == 1


def expire_at_the_claim(task: Task) -> None:
    run = waiting_run_past_its_deadline(task, RunStatus.QUEUED)
    assert run_execution.run_claim(run_id=str(run.pk), worker="w") is None


def while_a_completion_holds_the_state_row(run: Run, then: Callable[[], None]) -> None:
    """Complete ``run`` in a transaction left open, call ``then`` in another thread until it
    waits for the task's state row, then commit; both threads' errors are raised here."""
    completed, commit, errors = threading.Event(), threading.Event(), []

    def finish() -> None:
        try:
            with transaction.atomic():
                run_execution.run_complete(run=run)
                completed.set()
                assert commit.wait(20)
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)
            completed.set()
        finally:
            connections.close_all()

    def other() -> None:
        try:
            then()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=finish), threading.Thread(target=other)]
    threads[0].start()
    assert completed.wait(20) and not errors
    threads[1].start()

    def waits_for_the_row() -> bool:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND query ILIKE '%%tasks_app_taskstate%%'"
            )
            return cursor.fetchone()[0] > 0

    try:
        wait_until(waits_for_the_row, timeout=20, message="the second write to wait for the row")
    finally:
        commit.set()
        for thread in threads:
            thread.join(20)
    assert not errors, errors


@pytest.mark.django_db
@pytest.mark.parametrize("expire", [expire_by_the_sweep, expire_at_the_claim])
def test_an_expired_run_leaves_its_task_failed_by_every_path(
    expire: Callable[[Task], None],
) -> None:
    task = services.task_create(id="late", action="noop")
    expire(task)
    assert Run.objects.get(task=task).status == RunStatus.EXPIRED
    assert status(task) == TaskStatus.FAILED
    services.task_pause(task=task, note="looking into it")
    services.task_resume(task=task)
    assert status(task) == TaskStatus.FAILED  # resuming does not forget the expiry
    services.task_update(task=task, data={"name": "late, renamed"})
    assert status(task) == TaskStatus.FAILED


@pytest.mark.django_db
def test_a_recurring_task_whose_schedule_ended_keeps_its_last_runs_status() -> None:
    task = services.task_create(
        id="only-once", action="noop", schedule_type="interval", interval_seconds=60, max_runs=1
    )
    state = task.load_state()
    assert state.status == TaskStatus.PENDING and state.next_run_at is not None
    (fire,) = firing.schedule_fire_due(now=state.next_run_at, lookahead=timedelta(0))
    run_set(fire.pk, status=RunStatus.QUEUED, due_at=timezone.now())  # as if its instant came
    assert run_execution.run_execute(run_id=str(fire.pk), worker="w") is not None
    state = task.load_state()
    assert (state.status, state.next_run_at) == (TaskStatus.COMPLETED, None)  # max_runs reached
    services.task_pause(task=task)
    services.task_resume(task=task)
    assert status(task) == TaskStatus.COMPLETED  # not pending: nothing will fire again
    services.task_update(task=task, data={"description": "ran its one time"})
    assert status(task) == TaskStatus.COMPLETED


@pytest.mark.django_db
def test_resuming_a_task_with_a_waiting_run_makes_it_pending() -> None:
    task = services.task_create(id="held", action="noop")
    services.task_schedule_once(task=task, delay_seconds=600)
    services.task_pause(task=task)
    assert status(task) == TaskStatus.PAUSED
    services.task_resume(task=task)
    assert status(task) == TaskStatus.PENDING


@pytest.mark.django_db(transaction=True)
def test_an_edit_saved_while_a_run_finishes_keeps_the_status_the_run_wrote() -> None:
    """The edit syncs the task's schedule while the run's completion holds the task's state
    row (not yet committed): the sync must decide on the row as the completion leaves it,
    not write back the ``running`` it read before."""
    task = services.task_create(
        id="hourly", action="noop", schedule_type="interval", interval_seconds=3600
    )
    now = timezone.now()
    run = services.run_create(
        task=task, trigger=Trigger.API, due_at=now + timedelta(hours=1), now=now
    )
    run_set(run.pk, status=RunStatus.QUEUED, due_at=now)
    claimed = run_execution.run_claim(run_id=str(run.pk), worker="w")
    assert claimed is not None and status(task) == TaskStatus.RUNNING

    def edit() -> None:
        services.task_update(task=Task.objects.get(pk=task.pk), data={"name": "renamed"})

    while_a_completion_holds_the_state_row(claimed, edit)
    task.refresh_from_db()
    assert task.name == "renamed"
    state = task.load_state()
    assert state.status == TaskStatus.PENDING  # the run's end, not the running read before
    assert Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED


def queued_runs(task: Task, count: int) -> list[Run]:
    now = timezone.now()
    runs = [
        services.run_create(task=task, trigger=Trigger.API, due_at=now, now=now)
        for _ in range(count)
    ]
    for run in runs:
        run_set(run.pk, status=RunStatus.QUEUED)
    return runs


@pytest.mark.django_db
def test_a_task_stays_running_while_another_of_its_runs_runs() -> None:
    task = services.task_create(id="both", action="noop")  # overlap: allow
    first, second, waiting = queued_runs(task, 3)
    first, second = (run_execution.run_claim(run_id=str(r.pk), worker="w") for r in (first, second))
    assert first is not None and second is not None
    assert status(task) == TaskStatus.RUNNING

    run_execution.run_complete(run=first, output="done")
    assert status(task) == TaskStatus.RUNNING  # the second one still runs
    services.run_cancel(run=Run.objects.get(pk=waiting.pk))
    assert status(task) == TaskStatus.RUNNING
    services.run_fail(run=second, error="boom", retryable=False, executor=True)
    assert status(task) == TaskStatus.FAILED  # the last one to end tells


@pytest.mark.django_db
def test_a_task_waiting_for_its_next_attempt_is_pending_not_running() -> None:
    task = services.task_create(id="flaky", action="noop", max_retries=2, retry_backoff_seconds=60)
    (run,) = queued_runs(task, 1)
    claimed = run_execution.run_claim(run_id=str(run.pk), worker="w")
    assert claimed is not None
    services.run_fail(run=claimed, error="boom", retryable=True, executor=True)
    assert sorted(Run.objects.filter(task=task).values_list("status", flat=True)) == [
        RunStatus.PENDING,
        RunStatus.RETRYING,
    ]
    assert status(task) == TaskStatus.PENDING  # nothing runs; its next attempt waits


@pytest.mark.django_db(transaction=True)
def test_the_last_of_two_runs_to_end_at_once_leaves_its_task_with_its_outcome() -> None:
    """Two runs of a task end at the same moment: the second completion waits for the
    first's lock on the task's state row. Read with the second statement's own snapshot,
    the first run would still look running, and the task would stay running for good."""
    task = services.task_create(id="twice", action="noop")
    first, second = (
        run_execution.run_claim(run_id=str(r.pk), worker="w") for r in queued_runs(task, 2)
    )
    assert first is not None and second is not None
    while_a_completion_holds_the_state_row(
        first, lambda: services.run_fail(run=second, error="boom", retryable=False, executor=True)
    )
    assert sorted(Run.objects.filter(task=task).values_list("status", flat=True)) == [
        RunStatus.COMPLETED,
        RunStatus.FAILED,
    ]
    assert status(task) == TaskStatus.FAILED  # the second to end, with nothing running
