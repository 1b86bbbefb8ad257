"""/api/health against the real database, broker, cache and a real worker."""

from __future__ import annotations

import pytest
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from tasks_app.observability import health

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.e2e
def test_health_is_200_when_everything_is_up(worker) -> None:
    health.record_beat_tick(timezone.now())  # as TaskScheduler.tick does on every tick
    response = APIClient().get("/api/health")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ok" and body["down"] == []
    for name in ("database", "broker", "cache", "beat", "workers"):
        assert body[name]["ok"] is True, (name, body[name])
    assert body["workers"]["count"] >= 1
    assert 0 <= body["beat"]["age_seconds"] < 30


def test_health_is_503_naming_the_broker_when_rabbitmq_is_unreachable() -> None:
    health.record_beat_tick(timezone.now())
    with override_settings(CELERY_BROKER_URL="amqp://guest:guest@127.0.0.1:1//"):
        response = APIClient().get("/api/health")
    body = response.json()
    assert response.status_code == 503, body
    assert "broker" in body["down"] and "broker" in body["error"]
    assert body["broker"]["ok"] is False and body["broker"]["error"]
    assert "guest" not in body["broker"]["error"]  # no credentials leak into the report
    assert body["database"]["ok"] is True and body["cache"]["ok"] is True


def test_health_is_503_naming_beat_when_its_heartbeat_is_stale() -> None:
    health.record_beat_tick(timezone.now() - timezone.timedelta(minutes=10))
    body = APIClient().get("/api/health").json()
    assert "beat" in body["down"]
    assert body["beat"]["age_seconds"] >= 600


def test_health_reports_missed_run_alarms_without_failing() -> None:
    from tasks_app import services
    from tasks_app.models import TaskState

    health.record_beat_tick(timezone.now())
    task = services.task_create(
        id="watched",
        action="noop",
        schedule_type="interval",
        interval_seconds=60,
        alert_after_seconds=10,
    )
    TaskState.objects.filter(pk=task.pk).update(alarm_since=timezone.now(), alarm_note="late")
    body = APIClient().get("/api/health").json()
    assert body["alarms"] == 1
    assert "alarms" not in body["down"]
