"""At-least-once delivery, at-most-once execution: a duplicated message is acknowledged and
ignored; a lost message is published again under the same run id."""

from __future__ import annotations

import pytest
from celery import current_app
from django.conf import settings
from django.utils import timezone

from tasks_app import services
from tasks_app.beat import sweep
from tasks_app.messaging import dispatch
from tasks_app.models import Run, RunStatus
from tests.effects.models import Effect, Execution
from tests.processes import wait_until

from .conftest import Figures, StartProc

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def queue_depth() -> int | None:
    return sweep.ready_messages(settings.CELERY_TASK_DEFAULT_QUEUE)


def test_duplicate_messages_for_a_finished_run_are_acknowledged_and_ignored(
    fault_worker: StartProc,
) -> None:
    worker = fault_worker()
    task = services.task_create(id="once", action="test-effect", payload={})
    run = services.task_execute(task=task)
    wait_until(
        lambda: Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED,
        timeout=15,
        message="the run to complete",
    )
    run.refresh_from_db()
    before = (run.status, run.finished_at, run.worker)

    for _ in range(3):  # the broker delivers the same run's message again
        current_app.send_task(
            dispatch.EXECUTE_RUN, **dispatch.message_options(run, now=timezone.now())
        )
    wait_until(
        lambda: worker.log().count("message ignored") >= 3,
        timeout=15,
        message="the worker to ignore the duplicates",
    )
    worker.stop()  # unacknowledged messages would now be back in the queue
    assert queue_depth() == 0
    run.refresh_from_db()
    assert (run.status, run.finished_at, run.worker) == before
    assert Execution.objects.count() == 1 and Effect.objects.count() == 1


def test_lost_messages_are_published_again_under_the_same_run_id(
    fault_worker: StartProc, fault_beat: StartProc, figures: Figures
) -> None:
    task = services.task_create(id="lost", action="test-effect", payload={})
    runs = [services.task_execute(task=task) for _ in range(5)]
    assert all(Run.objects.get(pk=r.pk).status == RunStatus.QUEUED for r in runs)
    with current_app.connection_for_write() as conn:  # the broker loses the messages
        purged = conn.default_channel.queue_purge(settings.CELERY_TASK_DEFAULT_QUEUE)
    assert purged == 5

    fault_worker()
    fault_beat(TASKS_REQUEUE_AFTER_SECONDS="2")
    wait_until(
        lambda: Run.objects.filter(task=task, status=RunStatus.COMPLETED).count() == 5,
        timeout=30,
        message="the lost runs to be re-published and complete",
    )
    assert Run.objects.filter(task=task).count() == 5  # the same runs, no new attempts
    assert set(Effect.objects.values_list("run_id", flat=True)) == {r.id for r in runs}
    assert Execution.objects.count() == 5
    figures(runs=5, lost_messages=5, lost_runs=0, duplicated=0)
