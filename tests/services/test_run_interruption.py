"""Interruptions: a run cut off by its worker's death runs again as a new attempt that does
not count against ``max_retries``, up to ``TASKS_MAX_INTERRUPTIONS``; a redelivered message
tells a dead executor (its executor lock is free) from a live one. The real processes are in
tests/faults (test_worker_kill, test_deploy)."""

from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from tasks_app import services
from tasks_app.models import Run, RunStatus, Task, TaskStatus, Trigger
from tasks_app.worker import run_execution
from tests import processes
from tests.stored_rows import run_set

pytestmark = pytest.mark.django_db


def running_run(task: Task, **fields) -> Run:  # type: ignore[no-untyped-def]
    """A ``running`` run whose executor holds no lock anywhere (as after its death)."""
    now = timezone.now()
    run = services.run_create(
        task=task, trigger=Trigger.API, due_at=now + timedelta(hours=1), now=now, **fields
    )
    run_set(run.pk, status=RunStatus.RUNNING, queued_at=now, started_at=now, worker="w1@host")
    return Run.objects.select_related("task").get(pk=run.pk)


def attempts(run: Run) -> list[Run]:
    first = run.first_attempt_id or run.id
    return list(Run.objects.filter(pk=first).union(Run.objects.filter(first_attempt_id=first)))


def latest(run: Run) -> Run:
    return max(attempts(run), key=lambda r: r.attempt)


def test_an_interruption_is_not_counted_against_max_retries() -> None:
    task = services.task_create(id="no-retries", action="noop", max_retries=0)
    run = running_run(task)
    services.run_interrupt(run=run, reason="worker lost: w1@host died")
    cut = Run.objects.get(pk=run.pk)
    assert cut.status == RunStatus.INTERRUPTED
    assert cut.error == "interrupted (1 of at most 3): worker lost: w1@host died"
    second = latest(run)
    assert (second.attempt, second.interruptions, second.trigger) == (2, 1, Trigger.RETRY)
    assert second.status in {RunStatus.PENDING, RunStatus.QUEUED}
    assert second.due_at <= timezone.now()  # again at once, no backoff
    # The task's own failure still ends it: max_retries 0 allows no retry.
    run_set(second.pk, status=RunStatus.RUNNING)
    services.run_fail(run=Run.objects.select_related("task").get(pk=second.pk), error="boom")
    assert Run.objects.get(pk=second.pk).status == RunStatus.FAILED
    assert len(attempts(run)) == 2
    assert Task.objects.get(pk=task.pk).state.status == TaskStatus.FAILED


def test_retries_are_counted_without_the_interrupted_attempts() -> None:
    task = services.task_create(
        id="one-retry", action="noop", max_retries=1, retry_backoff_seconds=1
    )
    run = running_run(task)
    services.run_interrupt(run=run, reason="worker lost")
    second = latest(run)
    run_set(second.pk, status=RunStatus.RUNNING)
    services.run_fail(run=Run.objects.select_related("task").get(pk=second.pk), error="boom")
    # Attempt 2 is the first try that failed: one retry remains.
    assert Run.objects.get(pk=second.pk).status == RunStatus.RETRYING
    third = latest(run)
    assert (third.attempt, third.interruptions) == (3, 1)
    run_set(third.pk, status=RunStatus.RUNNING)
    services.run_fail(run=Run.objects.select_related("task").get(pk=third.pk), error="boom")
    assert Run.objects.get(pk=third.pk).status == RunStatus.FAILED
    assert len(attempts(run)) == 3


@override_settings(TASKS_MAX_INTERRUPTIONS=2)
def test_past_tasks_max_interruptions_the_run_fails_as_a_poison_pill() -> None:
    task = services.task_create(id="poison", action="noop", max_retries=5)
    run = running_run(task)
    for n in (1, 2, 3):
        current = latest(run)
        run_set(current.pk, status=RunStatus.RUNNING)
        services.run_interrupt(
            run=Run.objects.select_related("task").get(pk=current.pk), reason=f"kill {n}"
        )
    chain = sorted(attempts(run), key=lambda r: r.attempt)
    assert [r.status for r in chain] == [
        RunStatus.INTERRUPTED,
        RunStatus.INTERRUPTED,
        RunStatus.FAILED,
    ]
    assert chain[-1].error == "interrupted 3 times (TASKS_MAX_INTERRUPTIONS is 2); last: kill 3"
    # Failed for good although max_retries 5 remain: no fourth attempt.
    stored = Task.objects.get(pk=task.pk)
    assert stored.state.status == TaskStatus.FAILED and stored.state.consecutive_failures == 1


def test_two_processes_interrupting_one_run_make_one_new_attempt() -> None:
    task = services.task_create(id="raced", action="noop")
    run = running_run(task)
    services.run_interrupt(run=run, reason="seen by the sweep")
    services.run_interrupt(run=run, reason="seen by a redelivery")
    assert len(attempts(run)) == 2
    assert Run.objects.get(pk=run.pk).error.endswith("seen by the sweep")


@pytest.fixture
def other_session() -> Iterator[psycopg.Connection]:
    """A second database session, as another worker process has."""
    with psycopg.connect(processes.test_database_url(), autocommit=True) as conn:
        yield conn


def hold_executor_lock(conn: psycopg.Connection, run: Run) -> None:
    conn.execute("SELECT pg_advisory_lock(hashtextextended(%s::text, 0))", [run.pk])


def test_a_redelivered_message_of_a_run_whose_executor_died_interrupts_it(
    other_session: psycopg.Connection,
) -> None:
    task = services.task_create(id="orphan", action="noop")
    run = running_run(task)
    hold_executor_lock(other_session, run)
    other_session.close()  # the executor's process died: Postgres drops its lock
    assert run_execution.run_claim(run_id=str(run.id), worker="w2@host") is None
    cut = Run.objects.get(pk=run.pk)
    assert cut.status == RunStatus.INTERRUPTED
    assert cut.error == "interrupted (1 of at most 3): worker lost: w1@host died while running it"
    assert latest(run).interruptions == 1


def test_a_redelivered_message_of_a_run_whose_executor_is_alive_is_ignored(
    other_session: psycopg.Connection,
) -> None:
    task = services.task_create(id="alive", action="noop")
    run = running_run(task)
    hold_executor_lock(other_session, run)  # only the broker connection blinked
    assert run_execution.run_claim(run_id=str(run.id), worker="w2@host") is None
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
    assert len(attempts(run)) == 1


def held_here(run: Run) -> int:
    """1 if this session holds ``run``'s executor lock, else 0 (other runs' locks, which
    other tests' claims may have left on this connection, do not count)."""
    with connection.cursor() as cur:
        cur.execute(
            """SELECT count(*) FROM pg_locks AS l,
                      (SELECT hashtextextended(%s::text, 0) AS key) AS k
                WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.objsubid = 1
                  AND l.classid = ((k.key >> 32) & 4294967295)::oid
                  AND l.objid = (k.key & 4294967295)::oid""",
            [run.pk],
        )
        return int(cur.fetchone()[0])


def test_the_claim_takes_the_executor_lock_and_the_completion_releases_it(
    other_session: psycopg.Connection,
) -> None:
    task = services.task_create(id="locked", action="noop")
    now = timezone.now()
    run = services.run_create(
        task=task, trigger=Trigger.API, due_at=now + timedelta(hours=1), now=now
    )
    run_set(run.pk, status=RunStatus.QUEUED, queued_at=now, due_at=now)
    key = "SELECT pg_try_advisory_lock(hashtextextended(%s::text, 0))"
    claimed = run_execution.run_claim(run_id=str(run.id), worker="w1@host")
    assert claimed is not None
    assert other_session.execute(key, [run.pk]).fetchone() == (False,)  # held by the executor
    assert held_here(run) == 1
    run_execution.run_complete(run=claimed, output="done")
    assert held_here(run) == 0  # this session holds it no more
    assert other_session.execute(key, [run.pk]).fetchone() == (True,)
