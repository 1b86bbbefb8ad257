"""Django's task framework on runs, driven without a worker: what an enqueue stores, what it
refuses, and the ``TaskResult`` read back as the run moves (claim, complete, fail, retry
through the services a worker calls). The worker's side runs end to end in
tests/e2e/test_django_tasks.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from tasks_app import services
from tasks_app.django_tasks import (
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultStatus,
    enqueue_many,
    task_enqueued,
    task_finished,
    task_started,
)
from tasks_app.django_tasks.framework import run_priority
from tasks_app.models import Run, RunStatus, Task, Trigger
from tasks_app.schedules.sync import schedules_sync
from tasks_app.worker import run_execution
from tests.django_tasks import functions
from tests.stored_rows import run_set

pytestmark = pytest.mark.django_db


@pytest.fixture
def signals() -> Iterator[list[tuple[str, Any]]]:
    """Every task_enqueued / task_started / task_finished sent, with a copy of the status."""
    seen: list[tuple[str, Any]] = []
    receivers = {}
    for name, signal in (
        ("enqueued", task_enqueued),
        ("started", task_started),
        ("finished", task_finished),
    ):

        def receiver(sender: Any, task_result: Any, _name: str = name, **kw: Any) -> None:
            seen.append((_name, task_result.status))

        receivers[name] = receiver
        signal.connect(receiver, weak=False)
    yield seen
    for name, signal in (
        ("enqueued", task_enqueued),
        ("started", task_started),
        ("finished", task_finished),
    ):
        signal.disconnect(receivers[name])


def work(result_id: str, worker: str = "w1@host") -> Run:
    """What a worker does with the run's message: mark it queued (as the release would at
    commit, which a test transaction never reaches), then claim and execute it."""
    run_set(result_id, status=RunStatus.QUEUED, queued_at=timezone.now())
    done = run_execution.run_execute(run_id=result_id, worker=worker)
    assert done is not None
    return done


def test_enqueue_with_run_after_stores_a_run_due_then_whose_id_is_the_result_id(
    signals: list,
) -> None:
    at = timezone.now() + timedelta(minutes=5)
    result = functions.greet.using(run_after=at, priority=100).enqueue("ada", punctuation="?")
    run = Run.objects.select_related("task", "task__state").get(pk=result.id)
    assert run.due_at == at and run.trigger == Trigger.ENQUEUE and run.status == RunStatus.PENDING
    # The function's task: one per function, named by its path, its payload the function.
    assert run.task.id == "tests.django_tasks.functions.greet"
    assert run.task.action == "django_task"
    assert run.task.payload == {"task": "tests.django_tasks.functions.greet"}
    # The call is the run's own: its arguments, how it was enqueued, its priority.
    assert run.payload == {
        "task": "tests.django_tasks.functions.greet",
        "args": ["ada"],
        "kwargs": {"punctuation": "?"},
        "using": {"priority": 100, "queue_name": "default", "run_after": at.isoformat()},
    }
    assert run.priority == 9 and run.priority_level == 9  # Django's 100 is our highest
    assert run.queue == "" and run.queue_name == Task._meta.get_field("queue").get_default()
    assert run.task.state.next_run_at == at  # shown like any delayed run
    assert result.status == TaskResultStatus.READY and result.enqueued_at == run.created_at
    assert result.args == ["ada"] and result.kwargs == {"punctuation": "?"}
    assert signals == [("enqueued", TaskResultStatus.READY)]


def test_get_result_gives_back_the_task_as_it_was_enqueued(settings: Any) -> None:
    """Django: the result's ``task`` is "the Task the result was enqueued for": its
    priority, queue and ``run_after`` (a past one included), not the module-level task's."""
    queue = settings.TASKS_QUEUES[-1]
    past = timezone.now() - timedelta(minutes=1)
    enqueued = functions.greet.using(priority=50, queue_name=queue, run_after=past)
    result = enqueued.enqueue("ada")
    task = functions.greet.get_result(result.id).task
    assert (task.priority, task.queue_name, task.run_after) == (50, queue, past)
    assert functions.add.get_result(functions.add.enqueue(1, 2).id).task == functions.add


def test_an_enqueue_in_a_transaction_rolled_back_leaves_no_run() -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        functions.add.enqueue(1, 2)
        raise RuntimeError("the view failed after enqueueing")
    assert not Run.objects.exists() and not Task.objects.exists()


def test_enqueue_without_run_after_is_due_now() -> None:
    before = timezone.now()
    result = functions.add.enqueue(2, 3)
    run = Run.objects.get(pk=result.id)
    assert run.trigger == Trigger.ENQUEUE and before <= run.due_at <= timezone.now()
    # Due now: written queued, published when the transaction commits (the test's never does).
    assert run.status == RunStatus.QUEUED and run.queued_at == run.created_at


def test_a_thousand_enqueues_of_a_function_are_one_task_and_a_thousand_runs() -> None:
    """The task list speaks of the function across its calls; each call is a run with its
    own arguments, and its result reads back as before."""
    results = [functions.add.enqueue(i, i + 1) for i in range(1000)]
    assert list(Task.objects.values_list("id", flat=True)) == ["tests.django_tasks.functions.add"]
    runs = {str(r.id): r for r in Run.objects.all()}
    assert len(runs) == 1000
    for i, result in enumerate(results):
        assert runs[result.id].payload["args"] == [i, i + 1]
        back = functions.add.get_result(result.id)
        assert (back.id, back.args, back.status) == (result.id, [i, i + 1], TaskResultStatus.READY)
    task = Task.objects.select_related("state").get()
    assert task.state.status == "pending"
    assert task.state.next_run_at == min(r.due_at for r in runs.values())


def test_a_larger_priority_is_never_published_below_a_smaller_one() -> None:
    """Django: a larger priority runs sooner. 10 above the default 0 is a higher broker
    priority (both were 5), and no larger priority maps below a smaller one."""
    high, default = functions.add.using(priority=10).enqueue(1, 1), functions.add.enqueue(1, 1)
    low = functions.add.using(priority=-10).enqueue(1, 1)
    levels = {r.id: r.priority_level for r in Run.objects.select_related("task")}
    assert levels[uuid.UUID(high.id)] > levels[uuid.UUID(default.id)] > levels[uuid.UUID(low.id)]
    mapped = [run_priority(p) for p in range(-100, 101)]
    assert mapped == sorted(mapped) and (mapped[0], mapped[100], mapped[-1]) == (0, 5, 9)


def test_the_functions_task_policies_apply_to_every_call() -> None:
    """Retries set on the function's task (as an operator would, in the admin or the API)
    retry each call with its own arguments; a pause holds new calls."""
    functions.over_quota.enqueue("first")  # makes the function's task
    task = Task.objects.get()
    services.task_update(task=task, data={"max_retries": 2, "retry_backoff_seconds": 0})
    result = functions.over_quota.enqueue("carol")
    retry = work(result.id)
    assert retry.status == RunStatus.RETRYING
    second = Run.objects.get(first_attempt_id=result.id)
    assert second.payload["args"] == ["carol"] and second.trigger == Trigger.RETRY
    services.task_pause(task=task)
    held = Run.objects.get(pk=functions.over_quota.enqueue("dave").id)
    assert held.status == RunStatus.PENDING  # not published while its function is paused


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: functions.add.enqueue(timezone.now(), 1), "args[0]: a value of type datetime"),
        (lambda: functions.greet.enqueue(name={1: "x"}), "kwargs['name']: key 1 is not a string"),
        (lambda: functions.add.enqueue(1), "missing a required argument: 'b'"),
    ],
)
def test_arguments_that_do_not_survive_json_or_fit_the_function_are_refused(
    call: Any, named: str
) -> None:
    with pytest.raises(TypeError, match=named.replace("[", r"\[").replace("(", r"\(")):
        call()
    assert not Task.objects.exists() and not Run.objects.exists()  # nothing written


def test_a_queue_outside_tasks_queues_and_a_run_after_too_far_ahead_are_refused() -> None:
    with pytest.raises(InvalidTask, match="Queue 'nowhere' is not valid"):
        functions.add.using(queue_name="nowhere")
    with pytest.raises(InvalidTask, match=r"run_after: must be at most .*TASKS_MAX_DELAY_SECONDS"):
        functions.add.using(run_after=timezone.now() + timedelta(days=3650))
    assert not Task.objects.exists()


def test_a_successful_run_reads_back_successful_with_its_return_value(signals: list) -> None:
    result = functions.add.enqueue(2, 3)
    assert functions.add.get_result(result.id).status == TaskResultStatus.READY
    run = work(result.id)
    assert run.status == RunStatus.COMPLETED and run.result == {"sum": 5}
    done = functions.add.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == {"sum": 5}
    assert done.worker_ids == ["w1@host"] and done.attempts == 1 and done.errors == []
    assert done.started_at == run.started_at and done.finished_at == run.finished_at
    assert done.last_attempted_at == run.started_at
    assert [name for name, _ in signals] == ["enqueued", "started", "finished"]
    assert signals[1][1] == TaskResultStatus.RUNNING
    assert signals[2][1] == TaskResultStatus.SUCCESSFUL


def test_a_raising_function_reads_back_failed_with_its_exception_class(signals: list) -> None:
    result = functions.over_quota.enqueue("alice")
    run = work(result.id)
    assert run.status == RunStatus.FAILED
    failed = functions.over_quota.get_result(result.id)
    assert failed.status == TaskResultStatus.FAILED
    (error,) = failed.errors
    assert error.exception_class_path == "tests.django_tasks.functions.QuotaExceeded"
    assert error.exception_class is functions.QuotaExceeded
    assert "alice is over quota" in error.traceback and "Traceback" in error.traceback
    with pytest.raises(ValueError, match="Task failed"):
        failed.return_value  # noqa: B018
    assert signals[-1] == ("finished", TaskResultStatus.FAILED)


def test_a_return_value_that_is_not_json_fails_the_run_naming_it() -> None:
    result = functions.returns_a_set.enqueue()
    work(result.id)
    failed = functions.returns_a_set.get_result(result.id)
    assert failed.status == TaskResultStatus.FAILED
    assert failed.errors[0].exception_class_path == "builtins.TypeError"
    assert "return value: a value of type set is not JSON" in failed.errors[0].traceback


def test_the_id_held_answers_for_every_attempt_of_the_run() -> None:
    result = functions.over_quota.enqueue("bob")
    first = work(result.id, worker="w1@host")
    retry = services.run_retry(run=first)  # an operator's retry: a new attempt, a new row
    again = functions.over_quota.get_result(result.id)
    assert again.status == TaskResultStatus.READY  # the latest attempt is not done yet
    assert again.attempts == 1 and len(again.errors) == 1
    work(str(retry.id), worker="w2@host")
    final = functions.over_quota.get_result(result.id)
    assert final.status == TaskResultStatus.FAILED
    assert final.worker_ids == ["w1@host", "w2@host"] and final.attempts == 2
    assert len(final.errors) == 2 and final.id == result.id


def test_the_context_sees_the_attempt() -> None:
    result = functions.which_attempt.enqueue()
    work(result.id)
    assert functions.which_attempt.get_result(result.id).return_value == 1


def test_unknown_ids_and_runs_of_other_actions_are_not_results() -> None:
    with pytest.raises(TaskResultDoesNotExist, match="is not a run id"):
        functions.add.get_result("not-a-uuid")
    with pytest.raises(TaskResultDoesNotExist, match="no run"):
        functions.add.get_result("00000000-0000-0000-0000-000000000000")
    task = services.task_create(id="plain-echo", action="echo", payload={"message": "hi"})
    run = services.task_execute(task=task)
    with pytest.raises(TaskResultDoesNotExist, match="runs action 'echo', not a @task"):
        functions.add.get_result(str(run.id))


def test_a_policy_declared_in_code_takes_over_the_functions_task_and_is_read_only() -> None:
    """The function's task, made by its first enqueue, takes the policies declared for it
    (``function_policy``) and keeps its runs; declared, it refuses an edit."""
    earlier = functions.flaky.enqueue(1)
    schedules_sync("tests.django_tasks.schedules")
    task = Task.objects.get(pk="tests.django_tasks.functions.flaky")
    assert (task.max_retries, task.retry_backoff_seconds) == (2, 1)
    assert task.declared_in == "tests.django_tasks.schedules"
    assert Run.objects.get(pk=earlier.id).task_id == task.id
    with pytest.raises(services.ConflictError, match="is declared in tests.django_tasks.schedules"):
        services.task_update(task=task, data={"max_retries": 5})


def test_taking_over_a_functions_task_keeps_its_name_and_description() -> None:
    functions.flaky.enqueue(1)
    made = Task.objects.get(pk="tests.django_tasks.functions.flaky")
    assert made.description  # what its enqueue wrote
    plan = schedules_sync("tests.django_tasks.schedules")
    (change,) = plan.changes
    assert set(change.fields) == {"max_retries", "retry_backoff_seconds"}  # only the policies
    task = Task.objects.get(pk=made.pk)
    assert (task.name, task.description) == (made.name, made.description)


def test_enqueue_many_writes_a_batch_of_runs_of_the_functions_task(signals: list) -> None:
    results = enqueue_many(functions.add, [((i, 1), {}) for i in range(500)])
    assert [r.args for r in results] == [[i, 1] for i in range(500)]
    runs = {str(r.id): r for r in Run.objects.all()}
    assert set(runs) == {r.id for r in results}
    assert all(r.task_id == "tests.django_tasks.functions.add" for r in runs.values())
    assert all(r.status == RunStatus.QUEUED and r.trigger == Trigger.ENQUEUE for r in runs.values())
    assert functions.add.get_result(results[7].id).args == [7, 1]
    assert len(signals) == 500 and Task.objects.count() == 1
    later = functions.add.using(run_after=timezone.now() + timedelta(hours=1), priority=30)
    (held,) = enqueue_many(later, [((1, 2), {})])
    run = Run.objects.select_related("task__state").get(pk=held.id)
    assert run.status == RunStatus.PENDING and run.priority == 7
    assert run.task.state.next_run_at < run.due_at  # the batch due now comes first


def test_enqueue_many_checks_every_call_before_writing_any() -> None:
    with pytest.raises(TypeError, match=r"args\[0\]: a value of type datetime"):
        enqueue_many(functions.add, [((1, 2), {}), ((timezone.now(), 1), {})])
    with pytest.raises(TypeError, match="missing a required argument"):
        enqueue_many(functions.add, [((1,), {})])
    assert not Run.objects.exists() and not Task.objects.exists()
    assert enqueue_many(functions.add, []) == []


def test_a_function_that_returns_after_its_run_was_asked_to_stop_reports_it_cancelled(
    signals: list,
) -> None:
    """The request reaches the function while it runs (here as its worker's lease keeper
    marks it, right as it starts): it stops, the run ends ``cancelled`` and the result and
    ``task_finished`` say ``FAILED``, naming the run's end, not ``SUCCESSFUL``."""
    from tasks_app.actions import cancellation

    result = functions.until_cancelled.enqueue(60)

    def cancel_as_it_starts(sender: Any, task_result: Any, **kw: Any) -> None:
        services.run_cancel(run=Run.objects.get(pk=task_result.id))
        cancellation.begin(task_result.id)
        cancellation.mark_requested(task_result.id)

    task_started.connect(cancel_as_it_starts, weak=False)
    try:
        done = work(result.id)
    finally:
        task_started.disconnect(cancel_as_it_starts)
        cancellation.end(result.id)
    assert done.status == RunStatus.CANCELLED
    assert done.result == "stopped at the cancel request"
    assert signals[-1] == ("finished", TaskResultStatus.FAILED)
    read = functions.until_cancelled.get_result(result.id)
    assert read.status == TaskResultStatus.FAILED
    assert read.errors[-1].exception_class_path.endswith("RunEnded")
