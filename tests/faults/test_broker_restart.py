"""RabbitMQ restart (stop_app / start_app) with 1,000 runs pending and queued, and API calls
made during the outage: every call answers 202 at once, every run completes afterwards,
none is lost or duplicated."""

from __future__ import annotations

import subprocess
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone
from kombu import Connection
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.models import Run, RunStatus, Trigger
from tasks_app.services.run_create import new_run
from tests.processes import wait_until

from .conftest import Figures, StartProc
from .helpers import settled, tally

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

QUEUED, PENDING, DURING_OUTAGE = 500, 500, 20
OUTAGE_SECONDS = 10


def rabbitmqctl(verb: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", verb], check=True, timeout=120, capture_output=True)


def broker_up(url: str) -> bool:
    try:
        with Connection(url, connect_timeout=1) as conn:
            conn.ensure_connection(max_retries=1)
        return True
    except Exception:
        return False


def test_broker_restart_loses_and_duplicates_nothing(
    fault_worker: StartProc, fault_beat: StartProc, api: APIClient, figures: Figures
) -> None:
    fault_worker(concurrency=2)
    task = services.task_create(
        id="bulk", action="test-effect", payload={}, max_retries=2, retry_backoff_seconds=1
    )
    now = timezone.now()
    queued = [new_run(task, trigger=Trigger.API, due_at=now) for _ in range(QUEUED)]
    pending = [
        new_run(task, trigger=Trigger.API, due_at=now + timedelta(seconds=9))
        for _ in range(PENDING)
    ]
    Run.objects.bulk_create(queued + pending)
    assert services.publish_runs([r.id for r in queued]) == QUEUED
    fault_beat()  # started after the publish so it does not race the test for the batch

    calls: list[float] = []
    try:
        rabbitmqctl("stop_app")
        down_at = time.monotonic()
        at_stop = {
            s: Run.objects.filter(task=task, status=s).count()
            for s in (RunStatus.PENDING, RunStatus.QUEUED, RunStatus.COMPLETED)
        }
        for i in range(DURING_OUTAGE):  # operators keep using the API while the broker is away
            started = time.monotonic()
            if i % 2:
                response = api.post(f"/api/tasks/{task.id}/execute")
            else:
                response = api.post(
                    f"/api/tasks/{task.id}/schedule", {"delay_seconds": 1}, format="json"
                )
            calls.append(time.monotonic() - started)
            assert response.status_code == 202, response.content
            # The API's own publish failed: it answers the run pending, not lost. Beat may be
            # trying to publish it again meanwhile (``queued`` while that is in flight).
            assert response.json()["status"] == RunStatus.PENDING, response.json()
            stored = Run.objects.get(pk=response.json()["id"]).status
            assert stored in (RunStatus.PENDING, RunStatus.QUEUED), stored
        time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - down_at)))
        # Nothing could go out: beat keeps trying (a run is `queued` only while a publish is
        # in flight) and hands the runs back to `pending`.
        waiting = Run.objects.filter(
            task=task, status__in=[RunStatus.PENDING, RunStatus.QUEUED], started_at__isnull=True
        )
        assert waiting.count() >= PENDING + DURING_OUTAGE
    finally:
        rabbitmqctl("start_app")
        up_at, up_wall = time.monotonic(), timezone.now()
        wait_until(
            lambda: broker_up(settings.CELERY_BROKER_URL),
            timeout=60,
            interval=0.5,
            message="RabbitMQ to accept connections",
        )

    expected = QUEUED + PENDING + DURING_OUTAGE
    wait_until(
        lambda: settled(task, expected), timeout=150, interval=0.5, message="every run to end"
    )
    recovery_s = round(time.monotonic() - up_at, 1)
    first_after = (
        Run.objects.filter(task=task, finished_at__gt=up_wall).order_by("finished_at").first()
    )
    assert first_after is not None
    result = tally(task)
    assert result.requested == expected
    assert result.completed == expected
    assert result.effects == expected and result.lost == 0
    assert result.duplicated == 0 and result.attempts_executed_twice == 0
    assert max(calls) < 3, calls
    figures(
        runs=expected,
        queued_at_stop=at_stop[RunStatus.QUEUED],
        pending_at_stop=at_stop[RunStatus.PENDING],
        completed_before_stop=at_stop[RunStatus.COMPLETED],
        api_calls_during_outage=DURING_OUTAGE,
        api_call_max_s=round(max(calls), 2),
        outage_s=OUTAGE_SECONDS,
        lost=result.lost,
        duplicated=result.duplicated,
        retried_after_cancel=result.retried,
        first_completion_after_restart_s=round(
            (first_after.finished_at - up_wall).total_seconds(), 1
        ),
        all_done_after_restart_s=recovery_s,
    )
