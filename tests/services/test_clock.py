"""The one clock (``tasks_app.runtime.clock``): the database's "now", whatever the host's clock says.

In-process: the host's wall clock is shifted by patching ``time.time`` (what the offset is
measured against); the database and its clock are real. tests/e2e/test_clock_steps.py steps
the wall clock of real beat, worker and web processes with libfaketime.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.models import Run, RunStatus
from tasks_app.observability import health
from tasks_app.runtime import clock
from tasks_app.runtime.cache_keys import cache_key
from tasks_app.worker import run_execution
from tasks_app.worker.startup import eta_deadline
from tests.shared import queued_run
from tests.stored_rows import run_set

pytestmark = pytest.mark.django_db


def database_now():  # type: ignore[no-untyped-def]
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


@pytest.fixture
def host_an_hour_ahead(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 3600)
    yield
    cache.delete(cache_key(health.CLOCK_NAMES))  # the offsets recorded here, forgotten
    health._clock_recorded.clear()


def test_now_is_the_database_clock_read_once_and_carried_forward() -> None:
    clock.read()
    before = database_now()
    now = clock.now()
    after = database_now()
    assert before - timedelta(milliseconds=20) <= now <= after + timedelta(milliseconds=20)


def test_a_host_clock_an_hour_ahead_changes_no_now_and_is_reported(
    host_an_hour_ahead: None, caplog: pytest.LogCaptureFixture
) -> None:
    clock.read()
    assert abs((clock.now() - database_now()).total_seconds()) < 0.05
    with caplog.at_level(logging.WARNING, logger="tasks_app.runtime.clock"):
        skew = clock.skew_seconds()
    assert skew is not None and 3599 < skew < 3601
    assert "ahead of the database's" in caplog.text

    health.record_clock("worker-a@host pid 1")
    user = get_user_model().objects.create_superuser("root-clock", "r@example.com", "pw")
    client = APIClient()
    client.force_authenticate(user)
    health.record_beat_tick(timezone.now() - timedelta(seconds=1))
    body = client.get("/api/health").json()
    check = body["clock"]
    assert check["ok"] is False and "ahead of it" in check["error"]
    assert "worker-a@host pid 1" in check["skewed"]
    assert 3599 < check["processes"]["worker-a@host pid 1"] < 3601
    assert "clock" not in body["down"]  # informational: a skewed host is not an outage
    anonymous = APIClient().get("/api/health").json()["clock"]
    assert "processes" not in anonymous and anonymous["ok"] is False


def test_a_run_is_not_started_before_its_due_instant() -> None:
    task = services.task_create(id="not-yet", action="noop")
    run = queued_run(task)
    later = clock.now() + timedelta(minutes=10)
    run_set(run.pk, due_at=later)
    assert run_execution.run_claim(run_id=str(run.id), worker="w") is None
    stored = Run.objects.get(pk=run.pk)
    # Handed back: pending, and beat publishes it again when it comes due.
    assert (stored.status, stored.started_at) == (RunStatus.PENDING, None)


def test_a_message_a_moment_early_waits_for_the_due_instant() -> None:
    task = services.task_create(id="almost", action="noop")
    run = queued_run(task)
    due = clock.now() + timedelta(milliseconds=300)
    run_set(run.pk, due_at=due)
    claimed = run_execution.run_claim(run_id=str(run.id), worker="w")
    assert claimed is not None and claimed.status == RunStatus.RUNNING
    stored = Run.objects.get(pk=run.pk)
    assert stored.started_at is not None and stored.started_at >= due
    assert stored.lateness_ms is not None and stored.lateness_ms >= 0


def test_an_eta_waits_on_the_database_clock_not_the_host(host_an_hour_ahead: None) -> None:
    """Celery's own conversion would start a run due in 10 s at once on a host an hour
    ahead; the worker's waits the 10 s."""
    clock.read()
    deadline = eta_deadline(clock.now() + timedelta(seconds=10))
    assert 9.9 < deadline - time.monotonic() <= 10.0
