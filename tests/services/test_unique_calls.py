"""Unique calls (docs/flow-control.md): a second call with a waiting run's key gets that run
or replaces it, through every service way in; two racing calls make one run."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tasks_app import services
from tasks_app.django_tasks import enqueue_many
from tasks_app.models import Run, RunStatus, Task
from tasks_app.schedules.sync import schedules_sync
from tasks_app.services.django_task import function_task_of
from tasks_app.services.unique_calls import DIGEST_PREFIX, payload_key
from tests.django_tasks import functions
from tests.stored_rows import run_set

pytestmark = pytest.mark.django_db

NOTIFY = "tests.django_tasks.functions.notify"


def waiting(task_id: str) -> list[Run]:
    return list(Run.objects.filter(task_id=task_id, status__in=["pending", "queued"]))


def notify_task(**policy: Any) -> Task:
    task = function_task_of(NOTIFY)
    return services.task_update(task=task, data=policy)


def test_a_second_call_with_a_waiting_runs_key_gets_that_run_and_writes_nothing() -> None:
    task = services.task_create(id="report", action="noop")
    first = services.task_execute(task=task, unique_key="invoice-7")
    second = services.task_execute(task=task, unique_key="invoice-7")
    assert second.id == first.id and second.deduplicated and not first.deduplicated
    assert Run.objects.filter(task=task).count() == 1
    assert Run.objects.get(pk=first.id).unique_key == "invoice-7"
    # Another key, or no key, makes its own run.
    other = services.task_execute(task=task, unique_key="invoice-8")
    plain = services.task_execute(task=task)
    assert len({first.id, other.id, plain.id}) == 3


def test_the_key_belongs_to_one_task() -> None:
    a = services.task_create(id="a", action="noop")
    b = services.task_create(id="b", action="noop")
    assert (
        services.task_execute(task=a, unique_key="k").id
        != services.task_execute(task=b, unique_key="k").id
    )


def test_replace_cancels_the_waiting_run_naming_the_newest_and_keeps_only_it() -> None:
    task = services.task_create(id="report", action="noop")
    first = services.task_execute(task=task, unique_key="k", payload={"n": 1})
    second = services.task_execute(
        task=task, unique_key="k", on_duplicate="replace", payload={"n": 2}
    )
    third = services.task_execute(
        task=task, unique_key="k", on_duplicate="replace", payload={"n": 3}
    )
    assert [r.id for r in waiting(task.pk)] == [third.id]
    assert Run.objects.get(pk=third.id).payload == {"n": 3}
    for old, by in ((first, second), (second, third)):
        stored = Run.objects.get(pk=old.id)
        assert stored.status == RunStatus.CANCELLED
        assert stored.error == f"cancelled: replaced by run {by.id}"


def test_after_the_run_started_or_finished_a_call_makes_a_new_run() -> None:
    task = services.task_create(id="report", action="noop")
    first = services.task_execute(task=task, unique_key="k")
    run_set(first.id, status=RunStatus.RUNNING, started_at=timezone.now())
    started = services.task_execute(task=task, unique_key="k")
    assert started.id != first.id and not started.deduplicated
    run_set(started.id, status=RunStatus.COMPLETED, finished_at=timezone.now())
    finished = services.task_execute(task=task, unique_key="k")
    assert finished.id not in (first.id, started.id)


def test_a_window_holds_the_key_after_its_run_finished_until_it_ends() -> None:
    task = services.task_create(id="report", action="noop")
    first = services.task_execute(task=task, unique_key="k", unique_for_seconds=60)
    run_set(first.id, status=RunStatus.COMPLETED, finished_at=timezone.now())
    within = services.task_execute(task=task, unique_key="k", unique_for_seconds=60)
    assert within.id == first.id and within.deduplicated
    # The window counts from the call that made the run.
    Run.objects.filter(pk=first.id).update(created_at=timezone.now() - timedelta(seconds=61))
    after = services.task_execute(task=task, unique_key="k", unique_for_seconds=60)
    assert after.id != first.id and not after.deduplicated


def test_a_delayed_run_is_deduplicated_like_one_due_now() -> None:
    task = services.task_create(id="report", action="noop")
    later = services.task_schedule_once(task=task, delay_seconds=600, unique_key="k")
    again = services.task_schedule_once(task=task, delay_seconds=30, unique_key="k")
    assert again.id == later.id
    assert services.task_execute(task=task, unique_key="k").id == later.id


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"unique_key": "x" * 201}, "unique_key"),
        ({"unique_key": "k", "unique_for_seconds": -1}, "unique_for_seconds"),
        ({"unique_key": "k", "on_duplicate": "merge"}, "on_duplicate"),
        ({"unique_for_seconds": 5}, "unique_for_seconds"),
    ],
)
def test_bad_unique_fields_are_refused_naming_the_field(given: dict, field: str) -> None:
    task = services.task_create(id="report", action="noop")
    with pytest.raises(ValidationError) as caught:
        services.task_execute(task=task, **given)
    assert list(caught.value.message_dict) == [field]
    assert not Run.objects.filter(task=task).exists()


def test_a_task_policy_refuses_a_bad_unique_on() -> None:
    with pytest.raises(ValidationError) as caught:
        services.task_create(id="report", action="noop", unique_on="user id")
    assert "unique_on" in caught.value.message_dict
    with pytest.raises(ValidationError) as caught:
        services.task_create(id="report", action="noop", unique_for_seconds=-5)
    assert "unique_for_seconds" in caught.value.message_dict
    with pytest.raises(ValidationError) as caught:
        services.task_create(id="report", action="noop", debounce=True, unique_for_seconds=9)
    assert caught.value.message_dict == {
        "debounce": ["needs unique_on: without it the task's calls have no key"],
        "unique_for_seconds": ["needs unique_on: without it the task's calls have no key"],
    }


# --- @task functions: the key from their task's policy -----------------------------------


def test_a_duplicate_enqueue_returns_the_first_runs_result() -> None:
    notify_task(unique_on="user_id")
    first = functions.notify.enqueue(7, message="a")
    second = functions.notify.enqueue(user_id=7, message="b")  # by keyword: the same key
    assert second.id == first.id and second.kwargs == {"message": "a"}
    assert len(waiting(NOTIFY)) == 1
    assert functions.notify.enqueue(8).id != first.id
    assert Run.objects.get(pk=first.id).unique_key == "7"


def test_a_call_without_the_named_argument_is_not_deduplicated() -> None:
    notify_task(unique_on="message")
    a, b = functions.notify.enqueue(1), functions.notify.enqueue(1)
    assert a.id != b.id


def test_the_whole_call_as_key() -> None:
    notify_task(unique_on="*")
    a = functions.notify.enqueue(1, message="x")
    assert functions.notify.enqueue(1, message="x").id == a.id
    assert functions.notify.enqueue(1, message="y").id != a.id
    assert Run.objects.get(pk=a.id).unique_key.startswith(DIGEST_PREFIX)


def test_a_debounced_function_keeps_the_newest_call_due_its_window_after_it() -> None:
    notify_task(unique_on="user_id", debounce=True, unique_for_seconds=30)
    first = functions.notify.enqueue(7, message="a")
    before = timezone.now()
    last = functions.notify.enqueue(7, message="b")
    assert last.id != first.id
    (only,) = waiting(NOTIFY)
    assert only.id == last.id or str(only.id) == last.id
    assert only.payload["kwargs"] == {"message": "b"}
    assert only.due_at >= before + timedelta(seconds=30)
    assert Run.objects.get(pk=first.id).error == f"cancelled: replaced by run {last.id}"


def test_enqueue_many_deduplicates_within_the_batch_and_against_waiting_runs() -> None:
    notify_task(unique_on="user_id")
    earlier = functions.notify.enqueue(1)
    results = enqueue_many(functions.notify, [((1,), {}), ((2,), {}), ((2,), {}), ((3,), {})])
    ids = [r.id for r in results]
    assert ids[0] == earlier.id and ids[1] == ids[2] and len(set(ids)) == 3
    assert len(waiting(NOTIFY)) == 3


def test_a_function_without_a_policy_is_not_deduplicated() -> None:
    a, b = functions.notify.enqueue(1), functions.notify.enqueue(1)
    assert a.id != b.id and Run.objects.get(pk=a.id).unique_key == ""


def test_payload_key_of_other_actions_reads_the_payload_field() -> None:
    assert payload_key("order", {"order": 12, "x": 1}) == "12"
    assert payload_key("order", {"x": 1}) is None
    assert payload_key("*", {"x": 1}) == payload_key("*", {"x": 1})
    assert payload_key("*", {"x": 1}) != payload_key("*", {"x": 2})


def test_run_now_of_a_task_with_a_policy_is_deduplicated_on_its_payload() -> None:
    task = services.task_create(id="hook", action="noop", payload={"order": 5}, unique_on="order")
    first = services.task_execute(task=task)
    assert services.task_execute(task=task).id == first.id
    assert services.task_execute(task=task, payload={"order": 6}).id != first.id


# --- two racing calls ------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("on_duplicate", ["return", "replace"])
def test_racing_calls_with_one_key_leave_one_waiting_run(on_duplicate: str) -> None:
    task = services.task_create(id="report", action="noop")
    start = threading.Barrier(4)
    got: list[Any] = []
    errors: list[BaseException] = []

    def call() -> None:
        try:
            start.wait()
            got.append(
                services.task_schedule_once(
                    task=task, delay_seconds=600, unique_key="k", on_duplicate=on_duplicate
                ).id
            )
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(waiting(task.pk)) == 1
    if on_duplicate == "return":
        assert len(set(got)) == 1 and Run.objects.filter(task=task).count() == 1
    else:
        assert Run.objects.filter(task=task, status=RunStatus.CANCELLED).count() == 3


def test_a_policy_declared_in_code_deduplicates_the_functions_calls() -> None:
    schedules_sync("tests.django_tasks.unique_schedules")
    task = Task.objects.get(pk=NOTIFY)
    assert (task.unique_on, task.unique_for_seconds, task.debounce) == ("user_id", 30, False)
    first = functions.notify.enqueue(3)
    assert functions.notify.enqueue(3).id == first.id


def test_an_enqueue_without_a_key_policy_reads_no_task_row() -> None:
    """The plain way stays one statement of the store: no read of the task's policy, no
    lock (the ORM's queries are what the unique way adds; the store's own statement goes
    through psycopg directly and is not among them)."""
    functions.notify.enqueue(1)  # the function's task made (ORM) on its first enqueue
    with CaptureQueriesContext(connection) as plain:
        functions.notify.enqueue(2)
    assert len(plain) == 0, [q["sql"] for q in plain]
    notify_task(unique_on="user_id")
    with CaptureQueriesContext(connection) as keyed:
        functions.notify.enqueue(3)
    assert any("tasks_app_task" in q["sql"] for q in keyed)


def test_aenqueue_returns_the_first_runs_result_too() -> None:
    notify_task(unique_on="user_id")
    first = functions.notify.enqueue(5)
    again = async_to_sync(functions.notify.aenqueue)(5)
    assert again.id == first.id and len(waiting(NOTIFY)) == 1


def test_enqueue_many_of_a_debounced_function_keeps_each_keys_last_call() -> None:
    notify_task(unique_on="user_id", debounce=True)
    results = enqueue_many(
        functions.notify, [((1,), {"message": "a"}), ((1,), {"message": "b"}), ((2,), {})]
    )
    kept = {r.payload["kwargs"].get("message", "") for r in waiting(NOTIFY)}
    assert kept == {"b", ""} and len(waiting(NOTIFY)) == 2
    assert Run.objects.get(pk=results[0].id).error == f"cancelled: replaced by run {results[1].id}"
