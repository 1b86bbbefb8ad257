"""/metrics: Prometheus text that prometheus_client parses, guarded by a token or a network
rule, whose counters move when a real worker completes runs."""

from __future__ import annotations

import socket

import pytest
from django.test import override_settings

from tasks_app import services
from tasks_app.models import Run, RunStatus
from tasks_app.observability import metrics
from tasks_app.worker import run_execution
from tests.processes import wait_until
from tests.shared import runs_total, scrape
from tests.stored_rows import run_set

TOKEN = "s3cret-scrape-token"


@pytest.mark.django_db
@override_settings(TASKS_METRICS_TOKEN=TOKEN, TASKS_METRICS_ALLOWED_NETWORKS=["10.9.0.0/16"])
def test_token_or_network_is_required(client) -> None:
    assert client.get("/metrics").status_code == 401  # loopback is not in the allowed networks
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="10.9.3.4").status_code == 200


@pytest.mark.django_db
@override_settings(TASKS_METRICS_TOKEN="", TASKS_METRICS_ALLOWED_NETWORKS=["10.9.0.0/16"])
def test_outside_the_networks_without_a_token_is_forbidden(client) -> None:
    assert client.get("/metrics").status_code == 403


@pytest.mark.django_db
@override_settings(TASKS_METRICS_TOKEN=TOKEN)
def test_an_unreachable_cache_is_a_zero_gauge_not_an_error(client) -> None:
    assert scrape(client)["tasks_cache_up"] == {(): 1}
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    caches = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{port}/11",
        }
    }
    with override_settings(CACHES=caches):
        samples = scrape(client)
    assert samples["tasks_cache_up"] == {(): 0}
    assert samples["tasks_beat_tick_duration_seconds"] == {(): -1}  # unknown
    assert "tasks_runs_running" in samples  # the database's figures are still there


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_counters_and_lateness_histogram_move_when_runs_complete(client, worker) -> None:
    metrics.beat_tick_record(duration_seconds=0.012)
    before = scrape(client)
    assert before["tasks_beat_tick_duration_seconds"][()] == pytest.approx(0.012)
    assert "tasks_beat_last_heartbeat_timestamp_seconds" in before
    task = services.task_create(id="metered", action="echo", payload={"message": "m"})
    ids = [services.task_execute(task=task).pk for _ in range(3)]
    wait_until(
        lambda: Run.objects.filter(pk__in=ids, status=RunStatus.COMPLETED).count() == 3,
        timeout=30,
        message="three runs to complete",
    )
    after = scrape(client)
    assert runs_total(after, "completed", "echo") - runs_total(before, "completed", "echo") == 3
    count_before = before["tasks_run_start_lateness_seconds_count"][()]
    assert after["tasks_run_start_lateness_seconds_count"][()] == count_before + 3
    assert after["tasks_run_start_lateness_seconds_bucket"][(("le", "+Inf"),)] == count_before + 3
    assert after["tasks_run_start_lateness_seconds_bucket"][(("le", "5.0"),)] >= count_before + 3
    assert after["tasks_broker_queue_messages"]  # the broker answered for the default queue


@pytest.mark.django_db
@override_settings(TASKS_RUN_RETENTION_DAYS=30, TASKS_FAILED_RUN_RETENTION_DAYS=30)
def test_run_counters_do_not_go_back_when_retention_deletes_runs(client) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from tasks_app.models import Trigger

    task = services.task_create(id="counted", action="noop")
    now = timezone.now()
    for age_days, status in ((40, RunStatus.COMPLETED), (40, RunStatus.FAILED), (1, "completed")):
        run = services.run_create(task=task, trigger=Trigger.API, due_at=now, now=now)
        when = now - timedelta(days=age_days)
        run_set(
            run.pk, status=status, due_at=when, started_at=when, finished_at=when, lateness_ms=3.0
        )
    before = scrape(client)
    assert (
        runs_total(before, "completed", "noop") == 2 and runs_total(before, "failed", "noop") == 1
    )
    assert services.runs_prune().runs == 2
    after = scrape(client)
    assert runs_total(after, "completed", "noop") == 2 and runs_total(after, "failed", "noop") == 1
    assert after["tasks_run_start_lateness_seconds_count"][()] == 3
    assert after["tasks_run_start_lateness_seconds_bucket"][(("le", "0.005"),)] == 3


@pytest.mark.django_db
def test_the_paused_and_alarm_counts_are_read_from_their_indexes(client) -> None:
    """Each count through its partial index: one pass over every task for both took 0.2 s
    a scrape at 1,000,000 tasks."""
    from tests.plans import EVERY_SCAN, plan, sent

    paused = services.task_create(id="held", action="noop")
    services.task_pause(task=paused, note="")
    for where, index in (
        ('"tasks_app_taskstate"."status" = \'paused\'', "task_paused_idx"),
        ('"tasks_app_taskstate"."alarm_since" IS NOT NULL', "task_in_alarm_idx"),
    ):
        sql = sent(lambda: scrape(client), "COUNT(", where)
        assert index in (found := plan(sql, EVERY_SCAN[:1])), found
    assert scrape(client)["tasks_paused"] == {(): 1.0}


@pytest.mark.django_db
def test_a_running_run_asked_to_stop_is_cancelling_then_counted_cancelled(client) -> None:
    from tests.shared import queued_run

    task = services.task_create(id="stopped", action="noop")
    run = run_execution.run_claim(run_id=str(queued_run(task).id), worker="w@host")
    assert run is not None
    before = scrape(client)
    assert before["tasks_runs_cancelling"] == {(): 0}
    services.run_cancel(run=run)
    asked = scrape(client)
    assert asked["tasks_runs_cancelling"] == {(): 1}
    assert asked["tasks_runs_running"] == {(): 1}
    run_execution.run_complete(run=run)  # its action returned after seeing the request
    after = scrape(client)
    assert after["tasks_runs_cancelling"] == {(): 0}
    assert runs_total(after, "cancelled", "noop") == runs_total(before, "cancelled", "noop") + 1
    assert runs_total(after, "completed", "noop") == runs_total(before, "completed", "noop")


@pytest.mark.django_db
@override_settings(TASKS_METRICS_TOKEN=TOKEN)
def test_a_paused_queue_is_a_one_with_its_waiting_runs_and_a_zero_once_resumed(
    client, settings
) -> None:
    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}
    task = services.task_create(id="held-on-queue", action="noop")
    services.queue_pause(queue=queue, note="down")
    for _ in range(3):
        services.task_execute(task=task)
    samples = scrape(client, **bearer)
    assert samples["tasks_queue_paused"][(("queue", queue),)] == 1.0
    assert samples["tasks_queue_waiting_runs"][(("queue", queue),)] == 3.0
    services.queue_resume(queue=queue)
    assert scrape(client, **bearer)["tasks_queue_paused"][(("queue", queue),)] == 0.0
