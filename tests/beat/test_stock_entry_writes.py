"""``tasks_app.beat.scheduler.StockEntry``: beat writing down a fire of a hand-made entry never
undoes a person's edit committed at the same instant (the whole beat process:
tests/e2e/test_stock_entries.py)."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.db import connection
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from project.celery import app
from tasks_app.beat.scheduler import StockEntry
from tests.processes import test_database_url as database_url

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_edit_committed_while_beat_writes_a_fire_down_is_kept() -> None:
    every = IntervalSchedule.objects.create(every=5, period=IntervalSchedule.SECONDS)
    entry = PeriodicTask.objects.create(
        name="hand-made", task="tasks_app.execute_task", interval=every
    )
    fired = next(StockEntry(entry, app=app))  # beat's copy: enabled, one fire more

    with (
        psycopg.connect(database_url()) as person,
        psycopg.connect(database_url(), autocommit=True) as watcher,
    ):
        # The person's edit holds the row while beat writes its fire down.
        person.execute(
            "SELECT 1 FROM django_celery_beat_periodictask WHERE id = %s FOR UPDATE", [entry.pk]
        )
        writer = threading.Thread(target=lambda: (fired.save(), connection.close()))
        writer.start()
        deadline = time.monotonic() + 10
        blocked = "SELECT 1 FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))"
        while not watcher.execute(blocked, [person.info.backend_pid]).fetchone():
            assert time.monotonic() < deadline, "beat's write never reached the row"
            time.sleep(0.01)
        person.execute(
            "UPDATE django_celery_beat_periodictask SET enabled = false WHERE id = %s", [entry.pk]
        )
        person.commit()
        writer.join(10)

    entry.refresh_from_db()
    assert not entry.enabled  # stock's ModelEntry.save wrote back the enabled=True it had read
    assert entry.total_run_count == 1  # the fire is counted
    assert entry.last_run_at is None  # as stock keeps a disabled entry
