"""A task stays running while one of its runs is running: when one of two concurrent runs
ends, or a run fails and waits for its next attempt, the task no longer shows the ended
run's outcome (or "running" with nothing running).

- ``run_running_task_idx``: a task's running runs, the index ``tasks_app_other_running``
  reads (built with CREATE INDEX CONCURRENTLY: runs are written while it builds).
- ``tasks_app_other_running`` and ``tasks_app_status_on_create``; ``tasks_app_status_after``
  takes the run that ends. store.schema_sql() as it then was applied again (frozen in
  sql/0021_run_running_task.sql), its SCHEMA_SHA256 recorded.
"""

from pathlib import Path

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models

# store.schema_sql() as this migration applied it (frozen), and its sha256.
SCHEMA_FILE = Path(__file__).parent / "sql" / "0021_run_running_task.sql"
SCHEMA_SHA256 = "ba25e09510055797881b8b864c3abdee3d28527f289d7e7dc66f23a6ca37f485"

# The functions as migration 0020 left them.
REVERSE = """
DROP FUNCTION IF EXISTS tasks_app_status_on_create(tasks_app_task, tasks_app_taskstate);
DROP FUNCTION IF EXISTS tasks_app_status_after(tasks_app_task, tasks_app_taskstate, text, uuid);
CREATE OR REPLACE FUNCTION tasks_app_status_after(
    t tasks_app_task, s tasks_app_taskstate, run_status text
) RETURNS varchar LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN t.paused OR s.status = 'paused' THEN s.status
                ELSE tasks_app_task_status(t, s.next_run_at, run_status) END
$$;
CREATE OR REPLACE FUNCTION tasks_app_idle_status(
    t tasks_app_task, s tasks_app_taskstate
) RETURNS varchar LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM tasks_app_run AS r
                      WHERE r.task_id = t.id AND r.status = 'running') THEN 'running'
        WHEN EXISTS (SELECT 1 FROM tasks_app_run AS r
                      WHERE r.task_id = t.id AND r.status IN ('pending', 'queued'))
            THEN 'pending'
        ELSE tasks_app_task_status(t, s.next_run_at, (
            SELECT r.status FROM tasks_app_run AS r
             WHERE r.task_id = t.id
               AND r.status IN ('completed', 'failed', 'expired', 'cancelled')
             ORDER BY r.finished_at DESC NULLS LAST, r.due_at DESC
             LIMIT 1))
    END
$$;
DROP FUNCTION IF EXISTS tasks_app_other_running(varchar, uuid);
"""


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("tasks_app", "0020_run_trigger_earliest_waiting"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="run",
            index=models.Index(
                condition=models.Q(status="running"),
                fields=["task"],
                name="run_running_task_idx",
            ),
        ),
        migrations.RunSQL(SCHEMA_FILE.read_text(encoding="utf-8"), REVERSE),
    ]
