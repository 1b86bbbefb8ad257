"""Horizon release: far runs wait in the database (no message anywhere), near runs go out
with an exact ETA, and a failed publish leaves the run pending until the broker is back."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from celery import Celery
from django.utils import timezone

from project.celery import app as project_app
from tasks_app import services
from tasks_app.conf import app_settings
from tasks_app.models import Run, RunStatus
from tests.processes import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
HORIZON = app_settings.RELEASE_HORIZON_SECONDS


def held_etas() -> dict[str, str]:
    """ETA messages held by the running workers (``celery inspect scheduled``): id -> eta."""
    replies = project_app.control.inspect(timeout=2).scheduled() or {}
    return {item["request"]["id"]: item["eta"] for items in replies.values() for item in items}


def test_run_beyond_horizon_stays_pending_then_is_released_and_starts_on_time(
    worker_factory, beat_factory
) -> None:
    worker_factory()
    task = services.task_create(id="far-then-near", action="echo", payload={"message": "on time"})
    # Sub-second due time, beyond the horizon.
    due = timezone.now() + timedelta(seconds=HORIZON + 4, microseconds=123457)
    run = services.task_schedule_once(task=task, run_at=due)
    run.refresh_from_db()
    assert run.due_at == run.scheduled_for
    assert run.due_at.microsecond == due.microsecond  # kept to the microsecond
    assert run.status == RunStatus.PENDING and run.queued_at is None
    assert str(run.id) not in held_etas()  # no message: no worker holds anything for it

    beat_factory()
    wait_until(
        lambda: Run.objects.get(pk=run.pk).status != RunStatus.PENDING,
        timeout=HORIZON + 10,
        message="beat to release the run",
    )
    run.refresh_from_db()
    assert run.queued_at is not None and run.queued_at <= run.due_at  # released ahead of time
    eta = wait_until(
        lambda: held_etas().get(str(run.id)),
        timeout=5,
        interval=0.2,
        message="a worker to hold the released run's ETA message",
    )
    assert datetime.fromisoformat(eta) == run.due_at  # the exact, sub-second instant

    wait_until(
        lambda: Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED,
        timeout=HORIZON + 15,
        message="the released run to complete",
    )
    run.refresh_from_db()
    assert run.started_at >= run.due_at  # never early
    assert run.lateness_ms is not None and 0 <= run.lateness_ms < 1000
    assert run.output == "on time"


@pytest.fixture
def unreachable_broker():
    """Make the current Celery app one whose broker refuses connections; restore after."""
    broken = Celery("unreachable")
    broken.config_from_object("django.conf:settings", namespace="CELERY")
    dead = "amqp://guest:guest@127.0.0.1:1//"  # nothing listens on port 1
    broken.conf.update(broker_url=dead, broker_write_url=dead, broker_connection_timeout=1)
    assert broken.connection_for_write().as_uri().endswith(":1//")
    broken.set_current()
    try:
        yield broken
    finally:
        project_app.set_current()


def test_failed_publish_leaves_runs_pending_and_they_go_out_later(
    worker, unreachable_broker
) -> None:
    task = services.task_create(
        id="publish-fails", action="echo", payload={"message": "late but sent"}
    )
    single = services.task_execute(task=task)  # published at commit: one by one
    near = timezone.now() + timedelta(seconds=1)
    batch = [services.task_schedule_once(task=task, run_at=near) for _ in range(3)]
    services.publish_runs([r.id for r in batch])  # several at once: the batch publisher
    for run in [single, *batch]:
        run.refresh_from_db()
        assert run.status == RunStatus.PENDING and run.queued_at is None

    project_app.set_current()  # the broker is reachable again
    assert services.release_due_runs() == 4
    for run in [single, *batch]:
        wait_until(
            lambda r=run: Run.objects.get(pk=r.pk).status == RunStatus.COMPLETED,
            timeout=20,
            message="the run to complete once published",
        )
    assert Run.objects.get(pk=single.pk).output == "late but sent"
