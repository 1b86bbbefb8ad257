"""What happened when, by the database's own clock: the ground truth of the clock-step tests
and of the soak's clock checks.

:func:`install` adds a trigger on the run table (dropped by :func:`uninstall`) that records,
with ``clock_timestamp()`` read inside the statement that did it, every run insert and every
claim (a run's status becoming ``running``), with the run's ``due_at`` and ``scheduled_for``.
No process's clock is involved in the record, so a process that decided on its own stepped
clock is caught however its clock was off. The counts:

- :func:`early_starts`: claims at an instant before the run's ``due_at`` (beyond
  :data:`TOLERANCE`);
- :func:`future_fires`: schedule fires recorded for an instant further ahead of the database's
  clock than beat ever records one (:func:`fire_ahead_bound`: the release horizon plus one
  beat tick);
- :func:`duplicates`: runs claimed more than once, fires recorded twice for one instant;
- :func:`lost_fires`: the fires a recurring task's schedule has in a window that no run
  was recorded for.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection

TOLERANCE = timedelta(milliseconds=50)
TABLE = "clock_audit_event"

INSTALL = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    id bigserial PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    kind text NOT NULL,
    run_id uuid NOT NULL,
    task_id text NOT NULL,
    trigger text NOT NULL,
    due_at timestamptz,
    scheduled_for timestamptz,
    first_attempt_id uuid
);
CREATE OR REPLACE FUNCTION {TABLE}_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO {TABLE} (kind, run_id, task_id, trigger, due_at, scheduled_for,
                             first_attempt_id)
        VALUES ('insert', NEW.id, NEW.task_id, NEW.trigger, NEW.due_at, NEW.scheduled_for,
                NEW.first_attempt_id);
    END IF;
    IF NEW.status = 'running' AND (TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM 'running')
    THEN
        INSERT INTO {TABLE} (kind, run_id, task_id, trigger, due_at, scheduled_for,
                             first_attempt_id)
        VALUES ('claim', NEW.id, NEW.task_id, NEW.trigger, NEW.due_at, NEW.scheduled_for,
                NEW.first_attempt_id);
    END IF;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS {TABLE}_trigger ON tasks_app_run;
CREATE TRIGGER {TABLE}_trigger AFTER INSERT OR UPDATE OF status ON tasks_app_run
    FOR EACH ROW EXECUTE FUNCTION {TABLE}_record();
"""

UNINSTALL = f"""
DROP TRIGGER IF EXISTS {TABLE}_trigger ON tasks_app_run;
DROP FUNCTION IF EXISTS {TABLE}_record();
DROP TABLE IF EXISTS {TABLE};
"""


def install() -> None:
    """Start recording (again: an existing record is kept)."""
    with connection.cursor() as cursor:
        cursor.execute(INSTALL)


def uninstall() -> None:
    with connection.cursor() as cursor:
        cursor.execute(UNINSTALL)


def db_now() -> datetime:
    """The database's clock."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        (instant,) = cursor.fetchone()
    return instant  # type: ignore[no-any-return]


def fire_ahead_bound() -> timedelta:
    """How far ahead of the database's clock beat records a fire at most: the release
    horizon plus one beat tick (the settings of this process, which the tests' beats share),
    plus :data:`TOLERANCE`."""
    from tasks_app.conf import app_settings

    seconds = app_settings.RELEASE_HORIZON_SECONDS + app_settings.BEAT_TICK_SECONDS
    return timedelta(seconds=seconds) + TOLERANCE


@dataclass(frozen=True)
class Event:
    at: datetime
    kind: str
    run_id: str
    task_id: str
    trigger: str
    due_at: datetime | None
    scheduled_for: datetime | None

    def __str__(self) -> str:
        due = self.due_at.isoformat() if self.due_at else "-"
        return f"{self.kind} of {self.trigger} run {self.run_id} ({self.task_id}) at {self.at.isoformat()}, due {due}"


def _events(where: str, params: list[Any]) -> list[Event]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT at, kind, run_id::text, task_id, trigger, due_at, scheduled_for "
            f"FROM {TABLE} WHERE {where} ORDER BY at",
            params,
        )
        return [Event(*row) for row in cursor.fetchall()]


def _scope(since: datetime | None, tasks: list[str] | None) -> tuple[str, list[Any]]:
    where, params = ["TRUE"], []
    if since is not None:
        where.append("at >= %s")
        params.append(since)
    if tasks is not None:
        where.append("task_id = ANY(%s)")
        params.append(list(tasks))
    return " AND ".join(where), params


def early_starts(*, since: datetime | None = None, tasks: list[str] | None = None) -> list[Event]:
    """Claims made before the run's ``due_at`` by more than :data:`TOLERANCE`, by the
    database's clock."""
    where, params = _scope(since, tasks)
    return _events(f"{where} AND kind = 'claim' AND at < due_at - %s", [*params, TOLERANCE])


def future_fires(*, since: datetime | None = None, tasks: list[str] | None = None) -> list[Event]:
    """Schedule fires recorded for an instant more than :func:`fire_ahead_bound` ahead of
    the database's clock when they were recorded."""
    where, params = _scope(since, tasks)
    return _events(
        f"{where} AND kind = 'insert' AND trigger = 'schedule' AND scheduled_for > at + %s",
        [*params, fire_ahead_bound()],
    )


def duplicates(*, since: datetime | None = None, tasks: list[str] | None = None) -> list[str]:
    """Runs claimed more than once, and instants of a task recorded as a fire more than once."""
    where, params = _scope(since, tasks)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 'run ' || run_id || ' claimed ' || count(*) || ' times' FROM {TABLE} "
            f"WHERE {where} AND kind = 'claim' GROUP BY run_id HAVING count(*) > 1",
            params,
        )
        found = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            f"SELECT task_id || ' fired ' || count(*) || ' times for ' || scheduled_for "
            f"FROM {TABLE} WHERE {where} AND kind = 'insert' AND trigger = 'schedule' "
            f"AND first_attempt_id IS NULL GROUP BY task_id, scheduled_for HAVING count(*) > 1",
            params,
        )
        return found + [row[0] for row in cursor.fetchall()]


def recorded_fires(task_id: str) -> list[datetime]:
    """The instants recorded as fires of ``task_id``, in order."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT DISTINCT scheduled_for FROM {TABLE} WHERE task_id = %s AND kind = 'insert' "
            "AND trigger = 'schedule' AND first_attempt_id IS NULL ORDER BY scheduled_for",
            [task_id],
        )
        return [row[0] for row in cursor.fetchall()]


def lost_fires(task_id: str, start: datetime, end: datetime) -> list[datetime]:
    """The fires in ``(start, end]`` that the task's schedule has (interval fires aligned on
    its first recorded fire) and that no run was recorded for."""
    from tasks_app.models import Task
    from tasks_app.timing import scheduling
    from tasks_app.timing.task_schedule import schedule_of

    recorded = recorded_fires(task_id)
    task = Task.objects.get(pk=task_id)
    anchor = recorded[0] if recorded else start
    schedule = schedule_of(task, anchor=anchor)
    assert schedule is not None, f"{task_id} has no recurring schedule"
    expected = scheduling.fires_between(schedule, start, end, limit=100_000)
    return sorted(set(expected) - set(recorded))
