"""Django's task framework end to end: ``@task`` functions enqueued (from a ``manage.py
shell``, as a developer would, and from this process), executed by a real ``celery worker``,
read back with ``get_result`` and through the API under the same id."""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.db import connections
from django.utils import timezone
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.django_tasks import TaskResultStatus, enqueue_many
from tasks_app.models import Run, RunStatus
from tasks_app.schedules.sync import schedules_sync
from tasks_app.services.tokens import token_create
from tests.django_tasks import functions
from tests.processes import ROOT, process_env, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SHELL = """
from datetime import timedelta
from django.utils import timezone
from tests.django_tasks.functions import add
enqueued = timezone.now()
result = add.using(run_after=enqueued + timedelta(seconds=2)).enqueue(2, 3)
print("ENQUEUED", result.id, enqueued.isoformat())
"""


def api_client() -> APIClient:
    user = User.objects.create_superuser("dt-admin", password="not-used-here")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user).token}")
    return client


def finished(task: object, result_id: str) -> object | None:
    result = task.get_result(result_id)  # type: ignore[attr-defined]
    return result if result.is_finished else None


def test_run_after_from_a_manage_py_shell_starts_on_time_and_answers_under_one_id(
    worker: object,
) -> None:
    out = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SHELL],
        cwd=ROOT,
        env=process_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("ENQUEUED"))
    _, result_id, at = line.split()
    enqueued = datetime.fromisoformat(at)

    result = wait_until(lambda: finished(functions.add, result_id), timeout=20, message="add")
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"sum": 5}
    assert (result.started_at - enqueued).total_seconds() >= 2.0  # never before run_after
    assert len(result.worker_ids) == 1 and result.worker_ids[0].startswith("test-")
    run = Run.objects.get(pk=result_id)
    assert run.lateness_ms is not None and 0 <= run.lateness_ms < 1000

    answer = api_client().get(f"/api/runs/{result_id}")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["id"] == result_id and body["status"] == RunStatus.COMPLETED
    assert body["result"] == {"sum": 5}

    listed = subprocess.run(
        [sys.executable, "manage.py", "tasks", "runs", run.task_id, "--json"],
        cwd=ROOT,
        env=process_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert row["id"] == result_id and row["status"] == RunStatus.COMPLETED


def test_a_raising_task_is_failed_with_its_exception_class(worker: object) -> None:
    result = functions.over_quota.enqueue("alice")
    failed = wait_until(
        lambda: finished(functions.over_quota, result.id), timeout=20, message="over_quota"
    )
    assert failed.status == TaskResultStatus.FAILED
    (error,) = failed.errors
    assert error.exception_class_path == "tests.django_tasks.functions.QuotaExceeded"
    assert "alice is over quota" in error.traceback
    body = api_client().get(f"/api/runs/{result.id}").json()
    assert body["status"] == RunStatus.FAILED and "alice is over quota" in body["error"]


def test_a_task_raising_system_exit_is_one_failed_attempt_naming_it(worker: object) -> None:
    result = functions.exits.enqueue()
    failed = wait_until(lambda: finished(functions.exits, result.id), timeout=20, message="exits")
    assert failed.status == TaskResultStatus.FAILED
    (error,) = failed.errors  # one attempt: the pool process lived, no run was lost with it
    assert error.exception_class_path == "builtins.SystemExit"
    assert "raise SystemExit(3)" in error.traceback
    assert Run.objects.filter(task=Run.objects.get(pk=result.id).task).count() == 1


def test_a_function_declared_with_two_retries_fails_twice_then_succeeds(worker: object) -> None:
    """Policies of a @task function declared in code (``function_policy`` in a schedules
    module, applied by ``tasks sync``): each call retries with backoff under its own id."""
    schedules_sync("tests.django_tasks.schedules")
    result = functions.flaky.enqueue(3)
    done = wait_until(lambda: finished(functions.flaky, result.id), timeout=30, message="flaky")
    assert done.status == TaskResultStatus.SUCCESSFUL and done.return_value == 3
    assert done.attempts == 3 and len(done.worker_ids) == 3
    assert [e.exception_class_path for e in done.errors] == [
        "tests.django_tasks.functions.QuotaExceeded"
    ] * 2
    attempts = Run.objects.filter(pk=result.id) | Run.objects.filter(first_attempt_id=result.id)
    starts = sorted(r.started_at for r in attempts)
    gaps = [(b - a).total_seconds() for a, b in zip(starts, starts[1:], strict=False)]
    # Backoff 1 s doubling, with jitter on its upper half: at least 0.5 s, then 1 s.
    assert gaps[0] >= 0.5 and gaps[1] >= 1.0, gaps
    task = Run.objects.get(pk=result.id).task
    assert task.declared_in == "tests.django_tasks.schedules" and task.max_retries == 2


async def aenqueue_and_close(task: Any, *args: Any) -> Any:
    """``task.aenqueue(*args)``, then the database connection of the thread it ran in
    closed (a test's database is dropped at the end, with no session left on it)."""
    result = await task.aenqueue(*args)
    await sync_to_async(connections.close_all)()
    return result


def test_a_batch_and_an_async_enqueue_all_run_on_a_real_worker(worker: object) -> None:
    results = enqueue_many(functions.add, [((i, i), {}) for i in range(50)])
    # In a thread of its own: an event loop may be running in this one (browser tests').
    with ThreadPoolExecutor(1) as pool:
        results.append(pool.submit(asyncio.run, aenqueue_and_close(functions.add, 100, 1)).result())
    every = Run.objects.filter(pk__in=[r.id for r in results])
    wait_until(
        lambda: every.filter(status=RunStatus.COMPLETED).count() == 51,
        timeout=30,
        message="the 51 runs",
    )
    sums = [functions.add.get_result(r.id).return_value["sum"] for r in results]
    assert sums == [2 * i for i in range(50)] + [101]


def test_run_after_is_as_precise_as_a_delayed_run(worker: object) -> None:
    """20 of each, interleaved, due 2 s after their enqueue: the median lateness of
    ``run_after`` stays in line with the delayed runs' (the same path)."""
    delayed_task = services.task_create(id="delayed-anchor", action="noop")
    ids: list[str] = []
    delayed: list[str] = []
    for _ in range(20):
        at = timezone.now() + timedelta(seconds=2)
        ids.append(functions.add.using(run_after=at).enqueue(1, 1).id)
        delayed.append(str(services.task_schedule_once(task=delayed_task, delay_seconds=2).id))
    everything = Run.objects.filter(pk__in=ids + delayed)
    wait_until(
        lambda: everything.filter(status=RunStatus.COMPLETED).count() == 40,
        timeout=30,
        message="the 40 runs",
    )
    ours = [r.lateness_ms for r in everything if str(r.id) in ids]
    anchor = [r.lateness_ms for r in everything if str(r.id) in delayed]
    assert min(ours) >= 0 and min(anchor) >= 0
    mine, theirs = statistics.median(ours), statistics.median(anchor)
    print(f"lateness median: run_after {mine:.1f} ms, delayed run {theirs:.1f} ms")
    assert mine <= 2 * theirs + 50, (mine, theirs)


def test_a_task_of_our_own_with_a_task_function_as_its_action_records_the_value(
    worker: object,
) -> None:
    task = services.task_create(
        id="greet-now",
        action="django_task",
        payload={"task": "tests.django_tasks.functions.greet", "args": ["bob"]},
    )
    run = services.task_execute(task=task)
    done = wait_until(
        lambda: functions.greet.get_result(str(run.id)) if _done(run) else None,
        timeout=20,
        message="greet",
    )
    assert done.status == TaskResultStatus.SUCCESSFUL and done.return_value == "hello bob!"


def _done(run: Run) -> bool:
    run.refresh_from_db()
    return run.status not in (RunStatus.PENDING, RunStatus.QUEUED, RunStatus.RUNNING)
