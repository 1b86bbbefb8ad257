"""A beat tick's work follows the schedules that are due, not the schedules that are stored.

Measured as the rows Postgres reads from the tasks tables (``pg_stat_xact_user_tables``:
rows fetched through an index plus rows read by a scan, in this transaction), with a few
schedules due among thousands that are not: what the leader does on a tick — firing,
releasing, recovery, the missed-run alarms, retention's per-task rules — and what beat reads
at start-up, must not visit the tasks that have nothing to do now."""

from __future__ import annotations

from datetime import timedelta

import pytest
from celery import current_app
from django.db import connection
from django.utils import timezone
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

from tasks_app import services
from tasks_app.beat import alarms, firing, sweep
from tasks_app.beat.scheduler import TaskScheduler
from tasks_app.models import Run, Task
from tasks_app.services import EXECUTE_TASK
from tasks_app.services.runs_prune import prune_plan
from tests.scale.conftest import bulk_interval_tasks

pytestmark = [pytest.mark.django_db]

TABLES = ["tasks_app_task", "tasks_app_taskstate", "django_celery_beat_periodictask"]
DUE = 5
NOT_DUE = 3000


def rows_read() -> int:
    with connection.cursor() as cur:
        cur.execute(
            """SELECT COALESCE(SUM(COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0)), 0)
                 FROM pg_stat_xact_user_tables WHERE relname = ANY(%s)""",
            [TABLES],
        )
        return int(cur.fetchone()[0])


@pytest.fixture
def stored() -> None:
    """``DUE`` schedules due now (one watched by the missed-run alarm, one with a retention
    rule of its own) among ``NOT_DUE`` that fire in an hour, each owning its beat entry as
    the services name it, the tables analyzed as autovacuum leaves them."""
    later = bulk_interval_tasks(
        "later", NOT_DUE, every=7200, first=timezone.now() + timedelta(hours=1)
    )
    every = IntervalSchedule.objects.create(every=7200, period=IntervalSchedule.SECONDS)
    entries = PeriodicTask.objects.bulk_create(
        PeriodicTask(name=f"task:{t.id}", task=EXECUTE_TASK, interval=every) for t in later
    )
    for task, entry in zip(later, entries, strict=True):
        task.periodic_task = entry
    Task.objects.bulk_update(later, ["periodic_task"], batch_size=1000)
    # Due within the release horizon of the tick below (not in the past: a fire recorded
    # more than TASKS_MISFIRE_GRACE_SECONDS late is missed, not fired).
    bulk_interval_tasks("due", DUE, every=60, first=timezone.now() + timedelta(seconds=2))
    Task.objects.filter(pk="due-00000").update(alert_after_seconds=300)
    Task.objects.filter(pk="due-00001").update(keep_runs_count=10)
    analyze()


def analyze() -> None:
    with connection.cursor() as cur:
        for table in TABLES:
            cur.execute(f"ANALYZE {table}")


def test_a_leader_pass_reads_the_due_tasks_not_every_stored_schedule(stored: None) -> None:
    now = timezone.now()
    before = rows_read()

    sweep.recover_runs(now=now)
    fired = firing.schedule_fire_due(now=now, lookahead=services.horizon())
    services.release_due_runs(now=now)
    alarms.alarms_check(now=now)
    list(prune_plan(now=now))

    read = rows_read() - before
    assert len(fired) == DUE
    assert Run.objects.filter(task__id__startswith="later-").count() == 0
    # A handful of reads per due task (lock, plan, advance, ...), none for the others.
    assert read < 20 * DUE, f"{read} rows of the tasks tables read for {DUE} due schedules"


def test_beat_loads_only_the_entries_no_task_owns(stored: None) -> None:
    """At start-up and on each reload, beat's stock path loads django-celery-beat's own
    entries (made by hand, not owned by a task), without reading the tasks' entries."""
    services.task_create(id="owned", action="noop", schedule_type="interval", interval_seconds=60)
    hand_made = PeriodicTask.objects.create(
        name="hand-made",
        task="myapp.cleanup",
        interval=IntervalSchedule.objects.get(every=60, period=IntervalSchedule.SECONDS),
    )
    analyze()
    scheduler = TaskScheduler(app=current_app, lazy=True)
    before = rows_read()

    entries = scheduler.all_as_schedule()

    read = rows_read() - before
    assert set(entries) == {hand_made.name}
    assert read < 20, f"{read} rows of the tasks and beat tables read to load 1 stock entry"


def test_beat_start_up_query_does_not_grow_with_the_cron_schedules() -> None:
    """django-celery-beat narrows its load to the crontabs due within two hours, by zone:
    the query names each zone once, however many cron schedules are stored."""
    scheduler = TaskScheduler(app=current_app, lazy=True)

    def cron_tasks(prefix: str, count: int) -> None:
        for i in range(count):
            services.task_create(
                id=f"{prefix}-{i}",
                action="noop",
                schedule_type="cron",
                cron=f"{i % 60} {i // 60 % 24} * * *",
                timezone=("UTC", "Europe/Paris")[i % 2],
            )

    cron_tasks("few", 4)
    few = str(scheduler.enabled_models_qs().query)
    cron_tasks("many", 120)
    many = str(scheduler.enabled_models_qs().query)

    assert CrontabSchedule.objects.count() > 100
    assert len(many) == len(few)
