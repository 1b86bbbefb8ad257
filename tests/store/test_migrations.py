"""Data migrations, run by ``manage.py migrate`` on a database of their own holding rows as
the migration before them left them."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from tasks_app.conf import default_queue
from tests import processes


def _database_url(name: str) -> str:
    return urlunsplit(urlsplit(processes.test_database_url())._replace(path=f"/{name}"))


@pytest.fixture
def database() -> Iterator[str]:
    """The URL of a new, empty database (dropped afterwards)."""
    name = f"tasks_fold_{uuid.uuid4().hex[:10]}"
    server = _database_url("postgres")
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _database_url(name)
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _migrate(url: str, *target: str) -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input", *target],
        cwd=processes.ROOT,
        env=processes.process_env(DATABASE_URL=url),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"migrate failed:\n{done.stdout}\n{done.stderr}"


# Tasks and runs as enqueues wrote them before a function had one task: a task per call
# (created by "django.tasks"), its payload the call, and its one run; written by today's
# models. At 0024 the task row also held the alarm and schedule-error columns (moved to the
# state row by 0027) and the pause (moved by 0028), which the models no longer write: the
# database fills them with the values those models wrote for an unpaused task without an
# alarm (_OLD_TASK_COLUMNS).
_OLD_TASK_COLUMNS = """
ALTER TABLE tasks_app_task ALTER COLUMN alarm_note SET DEFAULT '',
                           ALTER COLUMN schedule_error SET DEFAULT '',
                           ALTER COLUMN paused SET DEFAULT false,
                           ALTER COLUMN pause_note SET DEFAULT '',
                           ALTER COLUMN paused_by SET DEFAULT ''
"""
# Columns today's models write that 0029 adds (the run's action and author), 0030 (a
# running run's cancel request), 0031 (flow control) and 0033 (unique calls: the run's key,
# the task's policy): there for the models' writes at 0024, dropped again before migrating on.
_NEW_RUN_COLUMNS = """
ALTER TABLE tasks_app_run ADD COLUMN action varchar(100) NOT NULL DEFAULT '',
                          ADD COLUMN requested_by varchar(250) NOT NULL DEFAULT '',
                          ADD COLUMN cancel_requested_at timestamptz NULL,
                          ADD COLUMN flow_key varchar(200) NOT NULL DEFAULT '',
                          ADD COLUMN held varchar(12) NOT NULL DEFAULT '',
                          ADD COLUMN not_before timestamptz NULL,
                          ADD COLUMN unique_key varchar(200) NOT NULL DEFAULT '';
ALTER TABLE tasks_app_task ADD COLUMN flow_key varchar(100) NOT NULL DEFAULT '',
                           ADD COLUMN concurrency_limit integer NULL,
                           ADD COLUMN concurrency_limit_per_key integer NULL,
                           ADD COLUMN rate_limit varchar(20) NOT NULL DEFAULT '',
                           ADD COLUMN rate_limit_per_key varchar(20) NOT NULL DEFAULT '',
                           ADD COLUMN unique_on varchar(100) NOT NULL DEFAULT '',
                           ADD COLUMN unique_for_seconds integer NOT NULL DEFAULT 0,
                           ADD COLUMN debounce boolean NOT NULL DEFAULT false
"""
_DROP_NEW_COLUMNS = """
ALTER TABLE tasks_app_run DROP COLUMN action, DROP COLUMN requested_by,
                          DROP COLUMN cancel_requested_at, DROP COLUMN flow_key, DROP COLUMN held,
                          DROP COLUMN not_before, DROP COLUMN unique_key;
ALTER TABLE tasks_app_task DROP COLUMN flow_key, DROP COLUMN concurrency_limit,
                           DROP COLUMN concurrency_limit_per_key, DROP COLUMN rate_limit,
                           DROP COLUMN rate_limit_per_key, DROP COLUMN unique_on,
                           DROP COLUMN unique_for_seconds, DROP COLUMN debounce
"""
ONE_OFFS = """
from datetime import timedelta
from django.utils import timezone
from tasks_app.models import Run, Task, TaskAuditEntry
due = timezone.now() + timedelta(hours=1)
for task_id, path, args, queue, priority, run_id in CALLS:
    task = Task.objects.create(
        id=task_id, name=path, action="django_task", queue=queue, priority=priority,
        payload={"task": path, "args": args, "kwargs": {}},
    )
    TaskAuditEntry.objects.create(task_id=task_id, by="django.tasks", event="created")
    Run.objects.create(id=run_id, task=task, trigger="at", due_at=due, scheduled_for=due)
Task.objects.filter(pk="thumbnail-777777").update(schedule_type="cron", cron="0 3 * * *")
"""


def test_one_off_tasks_of_enqueues_fold_into_their_functions_task(database: str) -> None:
    _migrate(database, "tasks_app", "0024")
    with psycopg.connect(database) as conn:
        conn.execute(_OLD_TASK_COLUMNS)
        conn.execute(_NEW_RUN_COLUMNS)
    path = "myapp.tasks.send_welcome_email"
    first, second, other = (str(uuid.uuid4()) for _ in range(3))
    calls = [
        ("send_welcome_email-0a1b2c", path, [1], default_queue(), 5, first),
        ("send_welcome_email-3d4e5f", path, [2], "mail", 9, second),
        # A task with a schedule is a person's, whoever created it: not folded.
        ("thumbnail-777777", "myapp.tasks.thumbnail", ["a.png"], default_queue(), 5, other),
    ]
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", f"CALLS = {calls!r}\n{ONE_OFFS}"],
        cwd=processes.ROOT,
        env=processes.process_env(DATABASE_URL=database),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    with psycopg.connect(database) as conn:
        conn.execute(_DROP_NEW_COLUMNS)
    _migrate(database)
    with psycopg.connect(database) as conn:
        tasks = dict(conn.execute("SELECT id, payload FROM tasks_app_task ORDER BY id").fetchall())
        runs = {
            str(r[0]): r[1:]
            for r in conn.execute(
                "SELECT id, task_id, payload, queue, priority, status FROM tasks_app_run"
            ).fetchall()
        }
        state = conn.execute(
            "SELECT status, next_run_at FROM tasks_app_taskstate WHERE task_id = %s", [path]
        ).fetchone()
    assert tasks[path] == {"task": path}
    assert "send_welcome_email-0a1b2c" not in tasks and "send_welcome_email-3d4e5f" not in tasks
    assert runs[first] == (path, {"task": path, "args": [1], "kwargs": {}}, "", None, "pending")
    assert runs[second] == (path, {"task": path, "args": [2], "kwargs": {}}, "mail", 9, "pending")
    assert runs[other][0] == "thumbnail-777777"
    assert state is not None and state[0] == "pending" and state[1] is not None


def test_alarms_and_schedule_errors_move_to_the_tasks_state_row(database: str) -> None:
    _migrate(database, "tasks_app", "0026")
    with psycopg.connect(database) as conn:
        for task_id in ("flagged", "late", "fine"):
            conn.execute(
                "INSERT INTO tasks_app_task (id, name, description, action, payload, queue,"
                " priority, max_retries, retry_backoff_seconds, schedule_type, cron, timezone,"
                " jitter_seconds, overlap_policy, catchup, catchup_window_seconds,"
                " alarm_note, schedule_error, declared_in, paused, pause_note, paused_by,"
                " created_at, updated_at)"
                " VALUES (%s, '', '', 'noop', '{}', 'default', 5, 0, 10, 'none', '', 'UTC',"
                " 0, 'allow', 'skip', 3600, '', '', '', false, '', '', now(), now())",
                [task_id],
            )
        conn.execute(
            "UPDATE tasks_app_task SET schedule_error = 'bad cron', alarm_note = 'bad cron',"
            " alarm_since = '2026-01-02T03:04:05Z' WHERE id = 'flagged'"
        )
        conn.execute(
            "UPDATE tasks_app_task SET alarm_note = 'fire not done',"
            " alarm_since = '2026-01-02T03:04:05Z' WHERE id = 'late'"
        )
    _migrate(database)
    with psycopg.connect(database) as conn:
        rows = conn.execute(
            "SELECT task_id, schedule_error, alarm_note, alarm_since IS NOT NULL"
            " FROM tasks_app_taskstate ORDER BY task_id"
        ).fetchall()
        columns = {
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_name = 'tasks_app_task'"
            )
        }
    assert rows == [
        ("fine", "", "", False),
        ("flagged", "bad cron", "bad cron", True),
        ("late", "", "fire not done", True),
    ]
    assert not {"alarm_since", "alarm_note", "schedule_error"} & columns


def _insert_task(conn: psycopg.Connection, task_id: str, *, paused_columns: bool) -> None:
    """A task row as the models wrote it, with the pause's columns (at 0027) or without
    (from 0028); its state row comes from the trigger."""
    pause = ", paused, pause_note, paused_by" if paused_columns else ""
    values = ", false, '', ''" if paused_columns else ""
    conn.execute(
        "INSERT INTO tasks_app_task (id, name, description, action, payload, queue,"
        " priority, max_retries, retry_backoff_seconds, schedule_type, cron, timezone,"
        f" jitter_seconds, overlap_policy, catchup, catchup_window_seconds, declared_in{pause},"
        " created_at, updated_at)"
        " VALUES (%s, '', '', 'noop', '{}', 'default', 5, 0, 10, 'none', '', 'UTC',"
        f" 0, 'allow', 'skip', 3600, ''{values}, now(), now())",
        [task_id],
    )


def test_the_pause_moves_to_the_tasks_state_row_and_back(database: str) -> None:
    _migrate(database, "tasks_app", "0027")
    with psycopg.connect(database) as conn:
        for task_id in ("held", "running", "free"):
            _insert_task(conn, task_id, paused_columns=True)
        # As task_pause left them at 0027: the task row and its state's status.
        conn.execute(
            "UPDATE tasks_app_task SET paused = true, pause_note = 'vendor down',"
            " paused_by = 'ana', paused_at = '2026-01-02T03:04:05Z' WHERE id = 'held'"
        )
        conn.execute("UPDATE tasks_app_taskstate SET status = 'paused' WHERE task_id = 'held'")
        # Paused on the task row only (its state left running): paused to the statements.
        conn.execute(
            "UPDATE tasks_app_task SET paused = true, paused_by = 'system',"
            " paused_at = '2026-01-02T03:04:05Z' WHERE id = 'running'"
        )
        conn.execute("UPDATE tasks_app_taskstate SET status = 'running' WHERE task_id = 'running'")
    _migrate(database)
    state_rows = (
        "SELECT task_id, status, paused_at IS NOT NULL, paused_by, pause_note"
        " FROM tasks_app_taskstate ORDER BY task_id"
    )
    with psycopg.connect(database) as conn:
        rows = conn.execute(state_rows).fetchall()
        columns = {
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_name = 'tasks_app_task'"
            )
        }
        # A task inserted from now on starts unpaused (the trigger no longer reads the task).
        _insert_task(conn, "new", paused_columns=False)
        new = conn.execute(
            "SELECT status FROM tasks_app_taskstate WHERE task_id = 'new'"
        ).fetchone()
    assert rows == [
        ("free", "created", False, "", ""),
        ("held", "paused", True, "ana", "vendor down"),
        ("running", "paused", True, "system", ""),
    ]
    assert not {"paused", "paused_at", "paused_by", "pause_note"} & columns
    assert new == ("created",)

    _migrate(database, "tasks_app", "0027")  # and back: the task rows hold the pause again
    with psycopg.connect(database) as conn:
        tasks = conn.execute(
            "SELECT id, paused, paused_by, pause_note FROM tasks_app_task ORDER BY id"
        ).fetchall()
    assert tasks == [
        ("free", False, "", ""),
        ("held", True, "ana", "vendor down"),
        ("new", False, "", ""),
        ("running", True, "system", ""),
    ]


def test_stored_runs_take_their_tasks_action_and_the_author_their_trigger_names(
    database: str,
) -> None:
    _migrate(database, "tasks_app", "0028")
    runs = {trigger: str(uuid.uuid4()) for trigger in ("schedule", "enqueue", "api")}
    with psycopg.connect(database) as conn:
        _insert_task(conn, "hook", paused_columns=False)
        conn.execute("UPDATE tasks_app_task SET action = 'http' WHERE id = 'hook'")
        for trigger, run_id in runs.items():
            conn.execute(
                "INSERT INTO tasks_app_run (id, task_id, trigger, status, attempt,"
                " scheduled_for, due_at, created_at, worker, output, truncated, error)"
                " VALUES (%s, 'hook', %s, 'completed', 1, now(), now(), now(), '', '', false,"
                " '')",
                [run_id, trigger],
            )
    _migrate(database)
    with psycopg.connect(database) as conn:
        found = {
            str(r[0]): r[1:]
            for r in conn.execute("SELECT id, action, requested_by FROM tasks_app_run")
        }
    assert found == {
        runs["schedule"]: ("http", "beat"),
        runs["enqueue"]: ("http", "code"),
        runs["api"]: ("http", ""),  # who asked was not recorded then
    }
