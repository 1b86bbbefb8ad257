"""Pausing a queue, through the services without a worker: the release publishes none of its
runs, beat records its fires pending, an enqueue waits, a message that still reaches a worker
is refused by the claim (the run back to pending, its due instant kept), a run's deadline
still applies, and resuming releases the waiting runs at once. Bad input and permissions
are refused with nothing written. The worker's side runs end to end in
tests/e2e/test_queue_pause.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.core.exceptions import ValidationError
from django.utils import timezone

from tasks_app import services
from tasks_app.beat import firing
from tasks_app.beat.sweep_writes import run_expire_overdue
from tasks_app.models import QueuePause, Run, RunStatus, Task, TaskStatus, Trigger
from tasks_app.services import permissions
from tasks_app.vocabulary import validation
from tasks_app.worker import run_execution
from tests.django_tasks import functions
from tests.shared import queued_run
from tests.stored_rows import run_set

pytestmark = pytest.mark.django_db

OTHER = "other-queue"


@pytest.fixture(autouse=True)
def _two_queues(settings) -> None:  # type: ignore[no-untyped-def]
    settings.TASKS_QUEUES = [settings.CELERY_TASK_DEFAULT_QUEUE, OTHER]


@pytest.fixture
def queue(settings) -> str:  # type: ignore[no-untyped-def]
    return str(settings.CELERY_TASK_DEFAULT_QUEUE)


def statuses(*runs: Run) -> list[str]:
    return [Run.objects.get(pk=r.pk).status for r in runs]


def test_a_message_of_a_paused_queue_is_refused_and_every_kind_of_run_waits_pending(
    queue: str,
) -> None:
    task = services.task_create(id="held", action="noop")
    # Published before the pause: their messages reach a worker while it holds.
    runs = [queued_run(task, trigger=t, late=5) for t in (Trigger.SCHEDULE, Trigger.DELAY)]
    runs.append(queued_run(task, trigger=Trigger.MANUAL, late=5))  # a person asked for it
    due = [r.due_at for r in runs]
    services.queue_pause(queue=queue, note="billing API down")

    for run in runs:
        assert run_execution.run_claim(run_id=str(run.id), worker="w") is None
    stored = [Run.objects.get(pk=r.pk) for r in runs]
    assert [r.status for r in stored] == [RunStatus.PENDING] * 3  # none skipped, none failed
    assert [r.due_at for r in stored] == due and all(r.started_at is None for r in stored)
    assert Task.objects.get(pk=task.pk).state.status != TaskStatus.RUNNING


def test_a_paused_queue_holds_only_its_own_runs(queue: str) -> None:
    mine = services.task_create(id="on-default", action="noop")
    other = services.task_create(id="on-other", action="noop", queue=OTHER)
    held, free = queued_run(mine), queued_run(other)
    own_queue = queued_run(mine, queue=OTHER)  # a run's own queue decides, not its task's
    services.queue_pause(queue=queue)
    assert run_execution.run_claim(run_id=str(held.id), worker="w") is None
    assert run_execution.run_claim(run_id=str(free.id), worker="w") is not None
    assert run_execution.run_claim(run_id=str(own_queue.id), worker="w") is not None
    assert statuses(held, free, own_queue) == [
        RunStatus.PENDING,
        RunStatus.RUNNING,
        RunStatus.RUNNING,
    ]


def test_the_release_publishes_no_run_of_a_paused_queue_and_resuming_releases_them(
    queue: str, django_capture_on_commit_callbacks
) -> None:
    services.queue_pause(queue=queue)
    task = services.task_create(id="waits", action="noop")
    now_run = services.task_execute(task=task)  # run now, on commit: not published
    later = services.task_schedule_once(task=task, delay_seconds=1)
    run_set(later.pk, due_at=timezone.now() - timedelta(seconds=1))
    assert services.release_due_runs() == 0
    assert statuses(now_run, later) == [RunStatus.PENDING] * 2
    assert QueuePause.objects.filter(queue=queue).exists()

    with django_capture_on_commit_callbacks(execute=True):
        assert services.queue_resume(queue=queue) is True
    assert not QueuePause.objects.filter(queue=queue).exists()
    # Released at once by the resume itself, not by beat's next pass.
    assert statuses(now_run, later) == [RunStatus.QUEUED] * 2


def test_beat_records_the_fires_of_a_paused_queue_pending_and_skips_none(queue: str) -> None:
    task = services.task_create(
        id="every-10s", action="noop", schedule_type="interval", interval_seconds=10
    )
    services.queue_pause(queue=queue)
    start = task.state.next_run_at
    assert start is not None
    for step in range(3):
        firing.schedule_fire_due(now=start + timedelta(seconds=10 * step), lookahead=timedelta(0))
    fires = Run.objects.filter(task=task, trigger=Trigger.SCHEDULE).order_by("due_at")
    assert [r.status for r in fires] == [RunStatus.PENDING] * 3
    assert [r.scheduled_for for r in fires] == [start + timedelta(seconds=10 * s) for s in range(3)]


def test_an_enqueue_from_code_on_a_paused_queue_waits_pending(
    queue: str, django_capture_on_commit_callbacks
) -> None:
    services.queue_pause(queue=queue)
    result = functions.add.enqueue(1, 2)
    assert Run.objects.get(pk=result.id).status == RunStatus.PENDING
    with django_capture_on_commit_callbacks(execute=True):
        services.queue_resume(queue=queue)
    assert Run.objects.get(pk=result.id).status == RunStatus.QUEUED


def test_a_runs_own_deadline_still_applies_while_its_queue_is_paused(queue: str) -> None:
    task = services.task_create(id="deadline", action="noop", expires_after_seconds=60)
    services.queue_pause(queue=queue)
    run = services.task_execute(task=task)
    run_set(run.pk, expires_at=timezone.now() - timedelta(seconds=1))
    assert run_expire_overdue(now=timezone.now()) == 1
    assert statuses(run) == [RunStatus.EXPIRED]


def test_pausing_again_keeps_the_first_pause_and_takes_a_new_note(queue: str) -> None:
    first = services.queue_pause(queue=queue, note="down", by="alice")
    again = services.queue_pause(queue=queue, note="still down", by="bob")
    assert (again.paused_at, again.paused_by, again.note) == (
        first.paused_at,
        "alice",
        "still down",
    )
    assert services.queue_pause(queue=queue, by="carol").note == "still down"
    assert QueuePause.objects.count() == 1
    assert services.queue_resume(queue=queue) is True
    assert services.queue_resume(queue=queue) is False  # not paused: nothing to do


@pytest.mark.parametrize(
    ("name", "field", "words"),
    [
        ("no-such-queue", "queue", "is not a configured queue"),
        ("two words", "queue", "No spaces"),
        ("", "queue", "required"),
        ("amq.direct", "queue", "amq."),
    ],
)
def test_a_bad_queue_name_is_refused_naming_the_field_and_nothing_is_written(
    name: str, field: str, words: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        services.queue_pause(queue=name)
    assert words in " ".join(refused.value.message_dict[field])
    with pytest.raises(ValidationError) as refused:
        services.queue_resume(queue=name)
    assert field in refused.value.message_dict
    assert not QueuePause.objects.exists()


def test_a_note_too_long_is_refused_and_nothing_is_written(queue: str) -> None:
    with pytest.raises(ValidationError) as refused:
        services.queue_pause(queue=queue, note="x" * (validation.PAUSE_NOTE_MAX_LENGTH + 1))
    assert refused.value.message_dict["note"] == [validation.PAUSE_NOTE_TOO_LONG]
    assert not QueuePause.objects.exists()


def test_pausing_and_resuming_need_the_pauses_own_permissions(queue: str) -> None:
    editor = User.objects.create_user("editor")
    editor.user_permissions.set(
        Permission.objects.filter(codename__in=["view_task", "change_task", "view_queuepause"])
    )
    with pytest.raises(permissions.OperationNotPermitted, match="add_queuepause"):
        services.queue_pause(queue=queue, by=User.objects.get(pk=editor.pk))
    assert not QueuePause.objects.exists()

    operator = User.objects.create_user("operator")
    operator.user_permissions.set(
        Permission.objects.filter(codename__in=["view_queuepause", "add_queuepause"])
    )
    operator = User.objects.get(pk=operator.pk)
    assert services.queue_pause(queue=queue, note="n", by=operator).paused_by == "operator"
    with pytest.raises(permissions.OperationNotPermitted, match="delete_queuepause"):
        services.queue_resume(queue=queue, by=operator)
    assert QueuePause.objects.filter(queue=queue).exists()
