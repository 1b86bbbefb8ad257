"""End to end: a poisoned task beside a 2 s interval task, real ``celery beat`` and
``celery worker`` processes. The interval task keeps firing on time; the poisoned ones are
flagged with their reason, shown in the admin and counted by ``/api/health``."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from tasks_app import services
from tasks_app.models import Run, RunStatus, Task
from tests.processes import wait_for_beat_after, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

POISONED = {
    # What the planner raises for each (rows only a direct write can make).
    "bad-zone": (
        "schedule_type = 'cron', cron = '* * * * *', timezone = 'Mars/Olympus'",
        "ZoneError",
    ),
    "bad-cron": ("schedule_type = 'cron', cron = '61 * * * *'", "CronError"),
}


def test_a_poisoned_task_is_flagged_and_the_interval_task_keeps_firing_on_time(
    worker, beat_factory, admin_client
) -> None:
    beat = beat_factory()
    wait_for_beat_after(timezone.now())  # beat is up and ticking before the tasks exist
    for task_id, (sql_set, _) in POISONED.items():
        services.task_create(
            id=task_id, action="noop", schedule_type="interval", interval_seconds=1
        )
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE tasks_app_task SET {sql_set} WHERE id = %s", [task_id])
    steady = services.task_create(
        id="every-2s", action="noop", schedule_type="interval", interval_seconds=2
    )
    completed = Run.objects.filter(task=steady, status=RunStatus.COMPLETED)
    wait_until(lambda: completed.count() >= 5, timeout=40, message="five fires of every-2s")
    beat.stop()

    runs = list(completed.order_by("scheduled_for"))
    instants = [r.scheduled_for for r in runs]
    # Every 2 s, none left out, each started within a second of its instant.
    assert all(b - a == timedelta(seconds=2) for a, b in zip(instants, instants[1:])), instants
    assert all(r.started_at >= r.due_at for r in runs)
    assert max(r.lateness_ms for r in runs) < 1000, [r.lateness_ms for r in runs]

    for task_id, (_, error) in POISONED.items():
        task = Task.objects.get(pk=task_id)
        assert not Run.objects.filter(task=task).exists()
        state = task.load_state()
        assert error in state.schedule_error, state.schedule_error
        assert state.alarm_since is not None and state.alarm_note == state.schedule_error
        page = admin_client.get(f"/admin/tasks_app/task/{task_id}/change/")
        assert page.status_code == 200 and error in page.content.decode()
    # One error line per poisoned task, not one per tick.
    assert beat.log().count("schedule error for task") == len(POISONED), beat.log()[-3000:]
    health = admin_client.get("/api/health").json()
    assert health["alarms"] == len(POISONED)
