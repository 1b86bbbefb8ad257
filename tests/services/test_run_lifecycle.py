"""A run's moves on the worker side, driven through the services without a worker: the
claim (and every reason it may refuse), completion, failure with and without retries, and
cancel. The message's side is covered end to end in tests/e2e and tests/faults."""

import re
from collections.abc import Iterator
from datetime import UTC, timedelta
from typing import Any

import pytest
from django.utils import timezone

from tasks_app import actions, services, store
from tasks_app.actions import base as actions_base
from tasks_app.models import Run, RunStatus, Task, TaskState, TaskStatus, Trigger
from tasks_app.worker import run_execution
from tasks_app.worker.lease_writes import run_stop_cancelled
from tests.shared import queued_run
from tests.stored_rows import run_set

pytestmark = pytest.mark.django_db


def test_claim_starts_a_queued_run_once_and_marks_the_task_running() -> None:
    task = services.task_create(id="claim-me", action="noop")
    run = queued_run(task, late=0.25)
    claimed = run_execution.run_claim(run_id=str(run.id), worker="w1@host")
    assert claimed is not None and claimed.status == RunStatus.RUNNING
    stored = Run.objects.get(pk=run.pk)
    assert stored.worker == "w1@host" and stored.started_at is not None
    assert stored.lateness_ms is not None and stored.lateness_ms >= 250
    assert Task.objects.get(pk=task.pk).state.status == TaskStatus.RUNNING
    # The same message delivered again (or a second worker) changes nothing.
    assert run_execution.run_claim(run_id=str(run.id), worker="w2@host") is None
    assert Run.objects.get(pk=run.pk).worker == "w1@host"


def test_a_message_that_names_no_run_is_ignored() -> None:
    assert run_execution.run_claim(run_id="not-a-uuid", worker="w") is None


def test_claim_past_the_deadline_expires_the_run_with_its_deadline_in_the_error() -> None:
    task = services.task_create(id="stale", action="noop")
    run = queued_run(task, late=30)
    deadline = timezone.now() - timedelta(seconds=10)
    Run.objects.filter(pk=run.pk).update(expires_at=deadline)
    assert run_execution.run_claim(run_id=str(run.id), worker="w") is None
    stored = Run.objects.get(pk=run.pk)
    assert stored.status == RunStatus.EXPIRED
    stamp = deadline.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert stored.error == f"expired: could not start by {stamp}"
    assert Task.objects.get(pk=task.pk).state.status == TaskStatus.FAILED


def test_a_paused_task_holds_delayed_runs_skips_fires_and_runs_what_a_person_asked_for() -> None:
    task = services.task_create(id="paused", action="noop")
    delayed = queued_run(task, trigger=Trigger.DELAY)
    manual = queued_run(task, trigger=Trigger.MANUAL)
    services.task_pause(task=task, note="maintenance")
    fire = queued_run(task, trigger=Trigger.SCHEDULE)  # queued as the pause committed
    assert run_execution.run_claim(run_id=str(delayed.id), worker="w") is None
    assert run_execution.run_claim(run_id=str(fire.id), worker="w") is None
    assert run_execution.run_claim(run_id=str(manual.id), worker="w") is not None
    statuses = dict(Run.objects.filter(task=task).values_list("id", "status"))
    assert statuses[delayed.id] == RunStatus.PENDING
    assert statuses[fire.id] == RunStatus.SKIPPED
    assert statuses[manual.id] == RunStatus.RUNNING
    assert Task.objects.get(pk=task.pk).state.status == TaskStatus.PAUSED


def test_complete_records_the_output_and_shows_the_next_waiting_run() -> None:
    task = services.task_create(id="report", action="echo", payload={"message": "hi"})
    run = run_execution.run_claim(run_id=str(queued_run(task).id), worker="w")
    assert run is not None
    later = services.task_schedule_once(task=task, delay_seconds=600)
    TaskState.objects.filter(pk=task.pk).update(consecutive_failures=2)
    run_execution.run_complete(run=run, output="hi", result={"n": 1})
    stored = Run.objects.get(pk=run.pk)
    assert (stored.status, stored.output, stored.result) == (RunStatus.COMPLETED, "hi", {"n": 1})
    task.refresh_from_db()
    assert (task.state.status, task.state.next_run_at, task.state.consecutive_failures) == (
        TaskStatus.COMPLETED,
        later.due_at,
        0,
    )
    # A second outcome for the same run (a redelivery that raced) is not recorded.
    services.run_fail(run=stored, error="late duplicate")
    assert Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED


def test_output_and_error_with_nul_characters_are_recorded() -> None:
    """Postgres text cannot hold NUL: a program that prints one (``cat /proc/self/environ``,
    a binary file) still gets its outcome recorded, the NUL shown as U+FFFD."""
    task = services.task_create(id="binary", action="noop")
    done = run_execution.run_claim(run_id=str(queued_run(task).id), worker="w")
    assert done is not None
    run_execution.run_complete(run=done, output="A=1\x00B=2\x00")
    failed = run_execution.run_claim(run_id=str(queued_run(task).id), worker="w")
    assert failed is not None
    services.run_fail(run=failed, error="exited 1\n\nPATH=/bin\x00")
    assert Run.objects.get(pk=done.pk).output == "A=1\ufffdB=2\ufffd"
    assert Run.objects.get(pk=failed.pk).error == "exited 1\n\nPATH=/bin\ufffd"


def test_failure_is_retried_while_retries_remain_then_fails_the_task() -> None:
    task = services.task_create(id="flaky", action="noop", max_retries=1)
    first = run_execution.run_claim(run_id=str(queued_run(task).id), worker="w")
    assert first is not None
    services.run_fail(run=first, error="boom")
    retry = Run.objects.get(first_attempt=first.pk)
    assert Run.objects.get(pk=first.pk).status == RunStatus.RETRYING
    assert (retry.attempt, retry.trigger, retry.status) == (2, Trigger.RETRY, RunStatus.PENDING)
    assert retry.due_at > timezone.now()

    run_set(retry.pk, status=RunStatus.QUEUED, due_at=timezone.now())  # its backoff passed
    second = run_execution.run_claim(run_id=str(retry.id), worker="w")
    assert second is not None
    services.run_fail(run=second, error="boom again")
    assert Run.objects.get(pk=retry.pk).status == RunStatus.FAILED
    assert Run.objects.filter(task=task).count() == 2
    task.refresh_from_db()
    assert (task.state.status, task.state.consecutive_failures) == (TaskStatus.FAILED, 1)


@pytest.mark.parametrize(
    ("action", "retries", "expected"),
    [
        ("echo", 0, RunStatus.COMPLETED),
        ("fail", 1, RunStatus.RETRYING),  # and a new attempt
        ("fail", 0, RunStatus.FAILED),  # the failure streak, one short of pausing the task
    ],
)
def test_a_claimed_run_executes_and_records_its_outcome_with_the_task_fields_it_returned(
    action: str, retries: int, expected: str
) -> None:
    """The claim returns only the task fields that executing and recording read
    (its ``"task.<column>"`` columns), and none of the others is loaded on the way; asked
    for, one still reads right."""
    task = services.task_create(
        id=f"lean-{action}-{retries}",
        action=action,
        payload={"message": "m"},
        max_retries=retries,
        expires_after_seconds=600,
        pause_after_failures=2,
    )
    run = queued_run(task)
    done = run_execution.run_execute(run_id=str(run.id), worker="w")
    assert done is not None and Run.objects.get(pk=run.pk).status == expected
    columns = set(re.findall(r'"task\.(\w+)"', store.queries()["claim_run"]))
    claimed = {f.attname for f in Task._meta.concrete_fields if f.column in columns}
    assert {"action", "payload", "max_retries"} <= claimed
    assert (
        done.task.get_deferred_fields() == {f.attname for f in Task._meta.concrete_fields} - claimed
    )
    if expected == RunStatus.RETRYING:
        retry = Run.objects.get(first_attempt=run.pk)
        assert (retry.attempt, retry.status) == (2, RunStatus.PENDING)
    assert (done.task.name, done.task.created_at) == (task.name, task.created_at)


def test_cancel_stops_a_waiting_run_at_once_and_asks_a_running_one_to_stop() -> None:
    task = services.task_create(id="cancel-me", action="noop")
    waiting = services.task_schedule_once(task=task, delay_seconds=600)
    services.run_cancel(run=waiting)
    assert Run.objects.get(pk=waiting.pk).status == RunStatus.CANCELLED
    task.refresh_from_db()
    assert (task.state.status, task.state.next_run_at) == (TaskStatus.CANCELLED, None)

    running = run_execution.run_claim(run_id=str(queued_run(task).id), worker="w")
    assert running is not None
    asked = services.run_cancel(run=running)
    assert asked.status == RunStatus.RUNNING and asked.cancel_requested_at is not None
    again = services.run_cancel(run=running)  # a second request keeps the first one's time
    assert again.cancel_requested_at == asked.cancel_requested_at
    assert Run.objects.get(pk=running.pk).status == RunStatus.RUNNING


@pytest.mark.parametrize(
    "end",
    ["completes", "fails", "times out", "interrupted", "swept"],
)
def test_a_running_run_asked_to_stop_ends_cancelled_however_it_ends(end: str) -> None:
    """Once a person asked a running run to stop, the store writes its end as ``cancelled``
    whoever records it, with no new attempt (no retry, no interruption's next attempt)."""
    task = services.task_create(id="stop-me", action="noop", max_retries=3)
    run = run_execution.run_claim(run_id=str(queued_run(task).id), worker="w")
    assert run is not None
    services.run_cancel(run=run)
    if end == "completes":
        done = run_execution.run_complete(run=run, output="stopped early", result={"step": 3})
    elif end == "fails":
        done = services.run_fail(run=run, error="RuntimeError: boom", executor=True)
    elif end == "times out":
        lost = services.run_lost(run_id=str(run.pk), error="timed out after 1 s")
        assert lost is not None
        done = lost
    elif end == "interrupted":
        done = services.run_interrupt(run=run, reason="worker lost: w died while running it")
    else:
        stopped = run_stop_cancelled(run_id=str(run.pk), reason="cancelled: ended")
        assert stopped is not None
        done = stopped
    stored = Run.objects.get(pk=run.pk)
    assert done.status == stored.status == RunStatus.CANCELLED
    assert stored.finished_at is not None
    assert not Run.objects.filter(first_attempt=run.pk).exists()  # no new attempt
    if end == "completes":
        assert (stored.output, stored.result) == ("stopped early", {"step": 3})
        assert stored.error == "cancelled: its action returned after the request to stop"
    task.refresh_from_db()
    assert task.state.status == TaskStatus.CANCELLED
    assert task.state.consecutive_failures == 0
    # Ended, it is not cancellable any more.
    with pytest.raises(
        services.ConflictError, match="is cancelled; only pending, queued or running"
    ):
        services.run_cancel(run=stored)


def test_a_run_not_asked_to_stop_completes_and_retries_as_before() -> None:
    task = services.task_create(id="left-alone", action="noop", max_retries=1)
    run = run_execution.run_claim(run_id=str(queued_run(task).id), worker="w")
    assert run is not None
    assert services.run_fail(run=run, error="boom", executor=True).status == RunStatus.RETRYING
    assert Run.objects.filter(first_attempt=run.pk).count() == 1


def test_cancel_needs_change_run() -> None:
    from django.contrib.auth.models import Permission, User
    from django.core.exceptions import PermissionDenied

    task = services.task_create(id="guarded", action="noop")
    run = run_execution.run_claim(run_id=str(queued_run(task).id), worker="w")
    assert run is not None
    viewer = User.objects.create_user("viewer")
    viewer.user_permissions.add(Permission.objects.get(codename="view_run"))
    with pytest.raises(PermissionDenied, match="change_run"):
        services.run_cancel(run=run, by=viewer)
    assert Run.objects.get(pk=run.pk).cancel_requested_at is None
    operator = User.objects.create_user("operator")
    operator.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_run", "change_run"])
    )
    operator = User.objects.get(pk=operator.pk)  # permissions are cached per user object
    assert services.run_cancel(run=run, by=operator).cancel_requested_at is not None


@pytest.mark.django_db(transaction=True)
def test_a_claim_racing_beat_keeps_the_next_fire_beat_wrote() -> None:
    """Beat advances a recurring task's next fire while a claim of one of its runs waits for
    the task's row: the claim must not write back the next fire it read (beat would then
    record the same fires again, and its insert deadlocked with the next claim)."""
    import threading

    import psycopg
    from django.db import connection

    task = services.task_create(
        id="every-second", action="noop", schedule_type="interval", interval_seconds=1
    )
    run = queued_run(task, trigger=Trigger.SCHEDULE)
    advanced = timezone.now() + timedelta(hours=1)
    params = connection.get_connection_params()
    with psycopg.connect(**params) as beat:  # a transaction of its own, as beat's tick
        beat.execute(
            "UPDATE tasks_app_taskstate SET next_run_at = %s WHERE task_id = %s",
            [advanced, task.pk],
        )
        claimed: list[Run | None] = []

        def claim() -> None:  # on the thread's own database connection, closed after
            try:
                claimed.append(run_execution.run_claim(run_id=str(run.id), worker="w"))
            finally:
                connection.close()

        claimer = threading.Thread(target=claim)
        claimer.start()
        claimer.join(timeout=1)
        assert claimer.is_alive()  # waiting for the task's state row, held by "beat"
        beat.commit()
    claimer.join(timeout=10)
    assert claimed and claimed[0] is not None
    task.refresh_from_db()
    assert (task.state.status, task.state.next_run_at) == (TaskStatus.RUNNING, advanced)


@pytest.mark.django_db(transaction=True)
def test_the_claim_commits_asynchronously_and_the_completion_durably() -> None:
    """The claim's own transaction commits with ``synchronous_commit = off`` (the broker still
    holds the message until the completion); the setting ends with that transaction, so the
    completion that follows on the same connection commits durably, before the ack."""
    from django.db import connection, transaction

    def synchronous_commit() -> str:
        with connection.cursor() as cur:
            cur.execute("SHOW synchronous_commit")
            return str(cur.fetchone()[0])

    task = services.task_create(id="durability", action="noop")
    assert synchronous_commit() == "on"
    with transaction.atomic():  # the claim's transaction, held open to look inside it
        claimed = run_execution.run_claim(run_id=str(queued_run(task).id), worker="w")
        assert claimed is not None and synchronous_commit() == "off"
    assert synchronous_commit() == "on"
    # As a worker runs it: the claim autocommits, then the completion on the same connection.
    run = run_execution.run_claim(run_id=str(queued_run(task).id), worker="w")
    assert run is not None and synchronous_commit() == "on"
    run_execution.run_complete(run=run)
    assert Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED


@pytest.fixture
def action_registry() -> Iterator[dict[str, actions.Action]]:
    """The registry of actions, restored after the test (which may unregister some)."""
    saved = dict(actions_base._REGISTRY)
    yield actions_base._REGISTRY
    actions_base._REGISTRY.clear()
    actions_base._REGISTRY.update(saved)


def test_a_run_of_an_action_this_worker_does_not_know_fails_saying_so(
    action_registry: dict[str, actions.Action],
) -> None:
    """A worker started before the action existed: the run fails with what to do, not a
    bare ``KeyError``."""

    @actions.register("deployed_later", description="registered by code the worker lacks")
    def deployed_later(payload: dict[str, Any], ctx: actions.RunContext) -> None:
        return None

    task = services.task_create(id="new-action", action="deployed_later", max_retries=0)
    run = queued_run(task)
    del action_registry["deployed_later"]  # the worker's process, as it started
    run_execution.run_execute(run_id=str(run.id), worker="w")
    failed = Run.objects.get(pk=run.pk)
    assert failed.status == RunStatus.FAILED
    assert failed.error == (
        "action 'deployed_later' is not registered in this worker: restart the workers "
        "after deploying the code that registers it"
    )
