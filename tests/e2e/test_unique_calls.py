"""Unique calls end to end: duplicate enqueues of a ``@task`` function whose task
deduplicates its calls make one run, which a real ``celery worker`` executes once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from tasks_app import services
from tasks_app.django_tasks import TaskResultStatus
from tasks_app.models import Run, RunStatus
from tasks_app.services.django_task import function_task_of
from tests.django_tasks import functions
from tests.processes import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

NOTIFY = "tests.django_tasks.functions.notify"
CALLS = 8


def finished(result_id: str) -> object | None:
    result = functions.notify.get_result(result_id)
    return result if result.is_finished else None


def test_duplicate_enqueues_from_many_threads_run_once(worker: object) -> None:
    services.task_update(task=function_task_of(NOTIFY), data={"unique_on": "user_id"})
    due = timezone.now() + timedelta(seconds=2)  # all the calls arrive while it waits

    def call(n: int) -> str:
        try:
            return str(functions.notify.using(run_after=due).enqueue(7, message=f"call {n}").id)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(4) as pool:
        ids = set(pool.map(call, range(CALLS)))
    assert len(ids) == 1, ids
    (result_id,) = ids
    result = wait_until(lambda: finished(result_id), timeout=30, message="the one run")
    assert result.status == TaskResultStatus.SUCCESSFUL
    runs = list(Run.objects.filter(task_id=NOTIFY))
    assert [(str(r.id), r.status, r.attempt) for r in runs] == [(result_id, RunStatus.COMPLETED, 1)]
    assert len(result.worker_ids) == 1  # started once

    # Its run has ended: the key is free, the next call makes (and runs) a new run.
    again = functions.notify.enqueue(7, message="later")
    assert again.id != result_id
    done = wait_until(lambda: finished(again.id), timeout=30, message="the next run")
    assert done.status == TaskResultStatus.SUCCESSFUL
