"""One bad row never stops the other schedules: beat's firing isolates the task whose
schedule math raises, flags it with the reason, skips it until it is edited, and the
release path fails a run whose message the broker refuses instead of retrying it forever.

Bad rows are written straight into the database (validation would refuse them): they stand
for rows stored before a validation rule existed, or by hand.
"""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from tasks_app import selectors, services
from tasks_app.beat import alarms, firing
from tasks_app.models import Run, RunStatus, Task, TaskState, Trigger

pytestmark = pytest.mark.django_db
LOOKAHEAD = timedelta(seconds=2)


def every_10s(task_id: str) -> Task:
    return services.task_create(
        id=task_id, action="noop", schedule_type="interval", interval_seconds=10
    )


def poison(task_id: str, sql_set: str) -> None:
    """Corrupt a row the way only a direct write can."""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE tasks_app_task SET {sql_set} WHERE id = %s", [task_id])


def fired(task_id: str) -> int:
    return Run.objects.filter(task_id=task_id, trigger=Trigger.SCHEDULE).count()


POISONS = {
    # Python side: the planner raises for this one task.
    "bad-cron": ("schedule_type = 'cron', cron = '61 * * * *'", "CronError"),
    "bad-zone": (
        "schedule_type = 'cron', cron = '* * * * *', timezone = 'Mars/Olympus'",
        "ZoneError",
    ),
    "end-of-time": ("start_at = '9999-12-31T23:59:59.999999Z'", "OverflowError"),
    # Database side: the row cannot even be read into Python (year 20000), so the batch's
    # statements fail and the batch is halved until the culprit stands alone.
    "unreadable": ("end_at = '20000-01-01T00:00:00Z'", "DataError"),
}


def test_poisoned_tasks_are_flagged_and_the_others_fire() -> None:
    good = [every_10s(f"good-{i:02d}").id for i in range(40)]
    for task_id, (sql_set, _) in POISONS.items():
        every_10s(task_id)
        poison(task_id, sql_set)
    now = max(TaskState.objects.values_list("next_run_at", flat=True))

    # A small batch so the unreadable row sits in a batch with good ones.
    firing.schedule_fire_due(now=now, lookahead=LOOKAHEAD, batch=16)

    assert [fired(t) for t in good] == [1] * len(good)
    for task_id, (_, error) in POISONS.items():
        task = TaskState.objects.filter(pk=task_id).values(
            "schedule_error", "alarm_since", "alarm_note"
        )
        row = task.get()
        assert fired(task_id) == 0
        assert error in row["schedule_error"], (task_id, row["schedule_error"])
        assert "beat skips this task until it is edited" in row["alarm_note"]
        assert row["alarm_since"] == now
    # Health counts them as alarms; the missed-run check leaves their alarm alone.
    assert selectors.tasks_in_alarm().count() == len(POISONS)
    alarms.alarms_check(now=now)
    assert selectors.tasks_in_alarm().count() == len(POISONS)

    # Next fire: the good tasks go on; the flagged ones are skipped (not retried every tick).
    later = now + timedelta(seconds=10)
    firing.schedule_fire_due(now=later, lookahead=LOOKAHEAD)
    assert [fired(t) for t in good] == [2] * len(good)
    assert sum(fired(t) for t in POISONS) == 0


def test_an_edit_through_the_services_clears_the_flag_and_the_task_fires_again() -> None:
    task = every_10s("bad-cron")
    poison(task.id, "schedule_type = 'cron', cron = '61 * * * *'")
    firing.schedule_fire_due(now=task.state.next_run_at, lookahead=LOOKAHEAD)
    state = task.load_state()
    assert state.schedule_error and state.alarm_since is not None

    task = services.task_update(task=task, data={"cron": "* * * * *"})
    state = task.load_state()
    assert state.schedule_error == "" and state.alarm_since is None and state.alarm_note == ""
    assert state.next_run_at is not None
    firing.schedule_fire_due(now=task.state.next_run_at, lookahead=LOOKAHEAD)
    assert fired(task.id) == 1


def test_a_run_whose_queue_the_broker_refuses_fails_with_the_reason_and_others_go_out() -> None:
    good = services.task_create(id="fine", action="noop")
    bad = services.task_create(id="reserved-queue", action="noop")
    # RabbitMQ refuses queue names with the reserved prefix "amq." (403 ACCESS_REFUSED).
    Task.objects.filter(pk=bad.pk).update(queue="amq.refused")
    now = timezone.now()
    runs = [
        Run.objects.create(task_id=t, trigger=Trigger.API, due_at=now, scheduled_for=now)
        for t in ("fine", "reserved-queue", "fine")
    ]

    assert services.release_due_runs(now=now) == 2

    statuses = {r.id: Run.objects.get(pk=r.id) for r in runs}
    assert [statuses[r.id].status for r in runs] == [
        RunStatus.QUEUED,
        RunStatus.FAILED,
        RunStatus.QUEUED,
    ]
    refused = statuses[runs[1].id]
    assert "the broker refused the run's message" in refused.error
    assert "ACCESS_REFUSED" in refused.error
    assert Task.objects.get(pk=bad.pk).state.status == "failed"
    # Nothing left to retry: the next pass sends nothing and logs nothing about it.
    assert services.release_due_runs(now=now) == 0
    assert good.pk == "fine"
