"""'Run now' keeps the task's own options: queue, timeout and retries (the stock
django-celery-beat admin action drops several of them)."""

import pytest

from tasks_app import services
from tasks_app.models import Run, RunStatus, Trigger
from tests.processes import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_run_now_uses_the_tasks_queue_timeout_and_retries(extra_queue, worker_factory) -> None:
    queue = extra_queue
    task = services.task_create(
        id="heavy",
        action="sleep",
        payload={"seconds": 4},
        queue=queue,
        priority=8,
        timeout_seconds=1,
        max_retries=1,
        retry_backoff_seconds=1,
    )
    worker_factory(TASKS_DEFAULT_QUEUE=queue)  # only this worker consumes the task's queue
    first = services.task_execute(task=task, trigger=Trigger.ADMIN)

    def attempts() -> list[Run]:
        runs = list(Run.objects.filter(task=task).order_by("attempt"))
        return runs if len(runs) == 2 and runs[1].status == RunStatus.FAILED else []

    first_run, second_run = wait_until(
        attempts, timeout=40, message="two attempts, the last failed"
    )
    assert first_run.id == first.id and first_run.status == RunStatus.RETRYING
    assert first_run.error.startswith("timed out after 1 s")
    assert second_run.trigger == Trigger.RETRY and second_run.first_attempt_id == first.id
    assert second_run.error.startswith("timed out after 1 s")
    assert all(r.worker.startswith("test-") for r in (first_run, second_run))
