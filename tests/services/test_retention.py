"""Retention (services.runs_prune): which finished runs go, in batches, with their Celery
results; what stays (recent, waiting, running, a task's own rule); later attempts survive
their deleted first attempt."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from django_celery_results.models import TaskResult

from tasks_app import services
from tasks_app.models import Run, RunStatus, Task, Trigger
from tests.stored_rows import run_set

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)


def old_run(task: Task, age: timedelta, status: str = RunStatus.COMPLETED, **fields) -> Run:  # type: ignore[no-untyped-def]
    now = timezone.now()
    run = services.run_create(
        task=task, trigger=Trigger.API, due_at=now + timedelta(hours=1), now=now
    )
    due = now - age
    finished = (
        due if status not in (RunStatus.PENDING, RunStatus.QUEUED, RunStatus.RUNNING) else None
    )
    run_set(run.pk, status=status, due_at=due, scheduled_for=due, finished_at=finished, **fields)
    return Run.objects.get(pk=run.pk)


def left(*runs: Run) -> set[str]:
    return {
        str(pk)
        for pk in Run.objects.filter(pk__in=[r.pk for r in runs]).values_list("pk", flat=True)
    }


@override_settings(TASKS_RUN_RETENTION_DAYS=30, TASKS_FAILED_RUN_RETENTION_DAYS=90)
def test_old_finished_runs_go_failed_ones_later_and_waiting_or_running_ones_never() -> None:
    task = services.task_create(id="kept-a-month", action="noop")
    old_done = old_run(task, 31 * DAY)
    old_skipped = old_run(task, 40 * DAY, RunStatus.SKIPPED)
    recent_done = old_run(task, 29 * DAY)
    failed_60 = old_run(task, 60 * DAY, RunStatus.FAILED)
    failed_91 = old_run(task, 91 * DAY, RunStatus.FAILED)
    expired_91 = old_run(task, 91 * DAY, RunStatus.EXPIRED)
    pending_old = old_run(task, 200 * DAY, RunStatus.PENDING)
    running_old = old_run(task, 200 * DAY, RunStatus.RUNNING)

    report = services.runs_prune()

    assert left(
        old_done,
        old_skipped,
        recent_done,
        failed_60,
        failed_91,
        expired_91,
        pending_old,
        running_old,
    ) == {str(r.pk) for r in (recent_done, failed_60, pending_old, running_old)}
    assert (report.runs, report.complete) == (4, True)
    assert services.runs_prune().runs == 0  # idempotent


@override_settings(TASKS_RUN_RETENTION_DAYS=30, TASKS_FAILED_RUN_RETENTION_DAYS=30)
def test_deletes_in_batches_of_the_given_size_until_nothing_is_left() -> None:
    task = services.task_create(id="many", action="noop")
    runs = [old_run(task, (31 + i) * DAY) for i in range(7)]
    report = services.runs_prune(batch=3)
    assert report.runs == 7 and left(*runs) == set()
    assert report.batches >= 3  # 3 + 3 + 1 for completed runs, then one empty look per step


@override_settings(TASKS_RUN_RETENTION_DAYS=30, TASKS_FAILED_RUN_RETENTION_DAYS=30)
def test_should_stop_interrupts_a_pass_between_batches() -> None:
    task = services.task_create(id="stopped", action="noop")
    runs = [old_run(task, (31 + i) * DAY) for i in range(5)]
    calls = []
    report = services.runs_prune(batch=2, should_stop=lambda: len(calls) > 0, pause=calls.append)
    assert (report.runs, report.complete) == (2, False)
    assert len(left(*runs)) == 3


@override_settings(TASKS_RUN_RETENTION_DAYS=0, TASKS_FAILED_RUN_RETENTION_DAYS=0)
def test_zero_days_keeps_everything() -> None:
    task = services.task_create(id="forever", action="noop")
    run = old_run(task, 3000 * DAY)
    assert services.runs_prune().runs == 0 and left(run) == {str(run.pk)}


@override_settings(TASKS_RUN_RETENTION_DAYS=30, TASKS_FAILED_RUN_RETENTION_DAYS=90)
def test_a_tasks_own_days_replace_the_global_ones_for_every_status() -> None:
    short = services.task_create(id="short", action="noop", keep_runs_days=2)
    long = services.task_create(id="long", action="noop", keep_runs_days=400)
    short_done, short_failed = old_run(short, 3 * DAY), old_run(short, 3 * DAY, RunStatus.FAILED)
    short_recent = old_run(short, 1 * DAY)
    long_old = old_run(long, 300 * DAY, RunStatus.COMPLETED)
    long_older = old_run(long, 401 * DAY, RunStatus.COMPLETED)
    services.runs_prune()
    assert left(short_done, short_failed, short_recent, long_old, long_older) == {
        str(short_recent.pk),
        str(long_old.pk),
    }


@override_settings(TASKS_RUN_RETENTION_DAYS=30, TASKS_FAILED_RUN_RETENTION_DAYS=90)
def test_keep_runs_count_keeps_the_newest_finished_runs_and_the_global_days_still_apply() -> None:
    task = services.task_create(id="last-three", action="noop", keep_runs_count=3)
    finished = [old_run(task, i * DAY) for i in range(1, 6)]  # newest first
    waiting = old_run(task, 10 * DAY, RunStatus.PENDING)
    ancient = old_run(task, 31 * DAY)
    services.runs_prune()
    assert left(*finished, waiting, ancient) == {str(r.pk) for r in (*finished[:3], waiting)}


@override_settings(TASKS_RUN_RETENTION_DAYS=30, TASKS_FAILED_RUN_RETENTION_DAYS=30)
def test_a_later_attempt_outlives_its_deleted_first_attempt_and_results_follow_runs() -> None:
    task = services.task_create(id="retried", action="noop")
    first = old_run(task, 40 * DAY, RunStatus.FAILED)
    retry = old_run(task, 1 * DAY, RunStatus.COMPLETED, attempt=2, first_attempt_id=first.pk)
    TaskResult.objects.create(task_id=str(first.pk), status="FAILURE")
    TaskResult.objects.create(task_id=str(retry.pk), status="SUCCESS")
    stock_old = TaskResult.objects.create(task_id="stock-old", status="SUCCESS")
    stock_new = TaskResult.objects.create(task_id="stock-new", status="SUCCESS")
    TaskResult.objects.filter(pk=stock_old.pk).update(date_done=timezone.now() - 31 * DAY)

    report = services.runs_prune()

    assert left(first, retry) == {str(retry.pk)}
    assert Run.objects.get(pk=retry.pk).first_attempt_id is None
    assert set(TaskResult.objects.values_list("task_id", flat=True)) == {
        str(retry.pk),
        stock_new.task_id,
    }
    assert (report.runs, report.task_results) == (1, 1)
