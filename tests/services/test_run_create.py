"""Creating a run keeps its task's status and ``next_run_at`` right (one statement does
both: ``create_run`` in tasks_app/store/queries.sql)."""

import pytest
from django.db import connection
from django.utils import timezone

from tasks_app import services
from tasks_app.models import Run, RunStatus, Task, TaskStatus, Trigger
from tasks_app.worker import run_execution
from tests.stored_rows import run_set, state_set

pytestmark = pytest.mark.django_db


def schedule(task: Task, seconds: float) -> Run:
    # Far beyond the release horizon: the run is stored, not published.
    return services.task_schedule_once(task=task, delay_seconds=seconds)


def test_delayed_runs_set_the_task_pending_with_its_earliest_run() -> None:
    task = services.task_create(id="report", action="noop")
    assert task.state.status == TaskStatus.CREATED
    later = schedule(task, 600)
    stored = Run.objects.get(pk=later.pk)
    assert (stored.status, stored.trigger, stored.due_at) == (
        RunStatus.PENDING,
        Trigger.DELAY,
        later.due_at,
    )
    task.refresh_from_db()
    assert (task.state.status, task.state.next_run_at) == (TaskStatus.PENDING, later.due_at)

    sooner = schedule(task, 300)
    task.refresh_from_db()
    assert task.state.next_run_at == sooner.due_at
    schedule(task, 900)
    task.refresh_from_db()
    assert task.state.next_run_at == sooner.due_at
    assert task.runs.filter(status=RunStatus.PENDING).count() == 3


def test_a_running_task_stays_running() -> None:
    task = services.task_create(id="report", action="noop")
    now = timezone.now()
    running = services.run_create(task=task, trigger=Trigger.API, due_at=now, now=now)
    run_set(running.pk, status=RunStatus.QUEUED)
    assert run_execution.run_claim(run_id=str(running.pk), worker="w") is not None
    run = schedule(task, 600)
    task.refresh_from_db()
    assert (task.state.status, task.state.next_run_at) == (TaskStatus.RUNNING, run.due_at)


def test_a_task_marked_running_with_no_run_running_becomes_pending() -> None:
    """The status follows the runs, not a stale ``running`` left in the state row."""
    task = services.task_create(id="report", action="noop")
    state_set(task.pk, status=TaskStatus.RUNNING)
    run = schedule(task, 600)
    task.refresh_from_db()
    assert (task.state.status, task.state.next_run_at) == (TaskStatus.PENDING, run.due_at)


def test_a_paused_task_stays_paused_and_shows_the_held_run() -> None:
    task = services.task_create(id="report", action="noop")
    services.task_pause(task=task, note="maintenance", by="ops")
    run = schedule(task, 600)
    task.refresh_from_db()
    assert (task.state.status, task.paused, task.state.next_run_at) == (
        TaskStatus.PAUSED,
        True,
        run.due_at,
    )


def test_a_recurring_task_keeps_its_planned_fire() -> None:
    task = services.task_create(
        id="heartbeat", action="noop", schedule_type="interval", interval_seconds=3600
    )
    planned = task.state.next_run_at
    assert planned is not None
    services.task_schedule_once(task=task, delay_seconds=60)
    task.refresh_from_db()
    assert task.state.next_run_at == planned
    assert task.runs.filter(trigger=Trigger.DELAY, status=RunStatus.PENDING).count() == 1


@pytest.mark.django_db(transaction=True)  # a fresh connection: nothing prepared on it yet
@pytest.mark.parametrize("prepared", [True, False], ids=["prepared", "pooler-mode"])
def test_lifecycle_statements_prepared_unless_turned_off(prepared: bool) -> None:
    """The store prepares creation, claim and completion once per connection in any project
    (Django's connections prepare nothing); a project whose database ``OPTIONS`` set
    ``prepare_threshold`` to ``None`` (a pooler without prepared statements) gets nothing
    prepared, and a run still goes through its whole life."""
    options = connection.settings_dict["OPTIONS"]
    kept = dict(options)
    options.pop("prepare_threshold", None)
    if not prepared:
        options["prepare_threshold"] = None
    connection.close()
    try:
        task = services.task_create(id="report", action="echo", payload={"message": "hi"})
        run = schedule(task, 600)
        run_set(run.pk, status=RunStatus.QUEUED, due_at=timezone.now())  # its instant came
        done = run_execution.run_execute(run_id=str(run.pk), worker="w1")
        assert done is not None
        stored = Run.objects.get(pk=run.pk)
        assert (stored.status, stored.output, stored.worker) == (RunStatus.COMPLETED, "hi", "w1")
        with connection.cursor() as cur:
            cur.execute("SELECT statement FROM pg_prepared_statements")
            statements = " ".join(row[0] for row in cur.fetchall())
        assert ("INSERT INTO tasks_app_run" in statements) is prepared
        assert ("SET status = 'running'" in statements) is prepared
        assert ("THEN 'completed' ELSE 'cancelled'" in statements) is prepared  # complete_run
    finally:
        options.clear()
        options.update(kept)
        connection.close()
