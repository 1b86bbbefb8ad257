"""Backfill (one run per fire between two instants), preview (the next N fires), and where a
pause is written."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from tasks_app import selectors, services
from tasks_app.models import Run, Task, TaskStatus, Trigger
from tasks_app.worker import run_execution
from tests.shared import queued_run

pytestmark = pytest.mark.django_db


def hourly() -> Task:
    return services.task_create(id="hourly", action="noop", schedule_type="cron", cron="0 * * * *")


def test_backfill_over_a_day_of_an_hourly_cron_creates_24_runs_with_their_instants() -> None:
    task = hourly()
    start = datetime(2026, 5, 1, tzinfo=UTC)
    runs = services.task_backfill(task=task, start=start, end=start + timedelta(days=1), by="ops")
    instants = sorted(
        r.scheduled_for for r in Run.objects.filter(task=task, trigger=Trigger.BACKFILL)
    )
    assert len(runs) == 24
    assert instants == [start + timedelta(hours=h) for h in range(1, 25)]
    # Backfilling the same range again records nothing twice.
    assert services.task_backfill(task=task, start=start, end=start + timedelta(days=1)) == []
    assert Run.objects.filter(task=task).count() == 24


def test_backfill_over_a_year_is_refused_and_writes_nothing() -> None:
    task = hourly()
    start = datetime(2025, 1, 1, tzinfo=UTC)
    with pytest.raises(ValidationError) as info:
        services.task_backfill(task=task, start=start, end=start + timedelta(days=365))
    assert "more than 1000 fires" in info.value.message_dict["end"][0]
    assert Run.objects.count() == 0


def test_backfill_of_an_interval_stays_on_the_schedule_grid() -> None:
    task = services.task_create(
        id="every-15m", action="noop", schedule_type="interval", interval_seconds=900
    )
    assert task.state.next_run_at is not None
    end = task.state.next_run_at - timedelta(hours=2)
    runs = services.task_backfill(task=task, start=end - timedelta(hours=1), end=end)
    assert len(runs) == 4
    assert all(
        (task.state.next_run_at - r.scheduled_for) % timedelta(seconds=900) == timedelta(0)
        for r in runs
    )


def test_backfill_needs_a_recurring_schedule() -> None:
    task = services.task_create(id="adhoc", action="noop")
    with pytest.raises(ValidationError, match="interval or cron"):
        services.task_backfill(
            task=task, start=datetime(2026, 1, 1, tzinfo=UTC), end=datetime(2026, 1, 2, tzinfo=UTC)
        )


def test_preview_gives_next_fires_in_the_zone_and_in_utc_before_saving() -> None:
    unsaved = Task(
        id="draft",
        action="noop",
        schedule_type="cron",
        cron="30 9 * * mon-fri",
        timezone="Europe/Berlin",
    )
    fires = selectors.task_preview(task=unsaved, count=5, now=datetime(2026, 3, 27, 12, tzinfo=UTC))
    assert [f.local.strftime("%a %d %H:%M %Z") for f in fires] == [
        "Mon 30 09:30 CEST",
        "Tue 31 09:30 CEST",
        "Wed 01 09:30 CEST",
        "Thu 02 09:30 CEST",
        "Fri 03 09:30 CEST",
    ]
    assert fires[0].utc == datetime(2026, 3, 30, 7, 30, tzinfo=UTC)


def test_preview_stops_where_the_schedule_ends_max_runs_counting_the_fires_recorded() -> None:
    now = datetime(2026, 3, 27, 12, tzinfo=UTC)
    unsaved = Task(id="p", action="noop", schedule_type="interval", interval_seconds=60, max_runs=3)
    assert len(selectors.task_preview(task=unsaved, count=5, now=now)) == 3

    task = services.task_create(
        id="three-fires", action="noop", schedule_type="interval", interval_seconds=60, max_runs=3
    )
    task.state.fire_count = 2  # as beat leaves it after two fires
    assert len(selectors.task_preview(task=task, count=5, now=now)) == 1
    task.state.fire_count = 3
    assert selectors.task_preview(task=task, count=5, now=now) == []

    ending = Task(
        id="e",
        action="noop",
        schedule_type="interval",
        interval_seconds=60,
        end_at=now + timedelta(minutes=2, seconds=30),
    )
    fires = selectors.task_preview(task=ending, count=5, now=now)
    assert fires and all(f.utc <= ending.end_at for f in fires) and len(fires) < 5


def _task_row_version(task_id: str) -> tuple[object, ...] | None:
    """The task row's ``updated_at`` and ``xmin`` (the transaction that last wrote the row:
    any UPDATE of it changes it, a lock does not)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT updated_at, xmin::text FROM tasks_app_task WHERE id = %s", [task_id])
        return cursor.fetchone()


def test_a_pause_and_a_resume_write_the_tasks_state_row_alone() -> None:
    """The engine's auto-pause (``pause_after_failures``) and a person's resume leave the
    task's row, its configuration, as it was: the pause, with who, when and why, is in the
    state row, and the task's beat entry follows it."""
    task = services.task_create(
        id="flaky",
        action="fail",
        payload={"message": "upstream down"},
        schedule_type="interval",
        interval_seconds=3600,
        pause_after_failures=2,
    )
    configured = _task_row_version(task.pk)
    for _ in range(2):
        run_execution.run_execute(run_id=str(queued_run(task).id), worker="w")

    paused = Task.objects.select_related("state", "periodic_task").get(pk=task.pk)
    assert _task_row_version(task.pk) == configured
    assert paused.paused and paused.state.status == TaskStatus.PAUSED
    assert paused.state.paused_by == "system" and paused.state.paused_at is not None
    note = paused.state.pause_note
    assert note.startswith("auto-paused after 2 consecutive failures") and "upstream down" in note
    assert paused.periodic_task is not None and not paused.periodic_task.enabled

    services.task_resume(task=paused, by="ops")
    resumed = Task.objects.select_related("state", "periodic_task").get(pk=task.pk)
    assert _task_row_version(task.pk) == configured
    assert not resumed.paused and resumed.state.status == TaskStatus.PENDING
    state = resumed.state
    assert (state.paused_at, state.paused_by, state.pause_note) == (None, "", "")
    assert resumed.periodic_task is not None and resumed.periodic_task.enabled
