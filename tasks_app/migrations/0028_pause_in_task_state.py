"""The pause moves from the task's configuration row (tasks_app_task, written only by a
person's edit or a sync) to its state row (tasks_app_taskstate), which the store's named
statements write: a task is paused when its state's status is ``paused``, and when, by whom
and why (``paused_at``, ``paused_by``, ``pause_note``) are there too. The values move with
it; the task's ``paused`` column and ``task_paused_idx`` on it are dropped, the index made
again on the state row. The SQL functions stop reading ``t.paused``: store.schema_sql() as
it then was applied again (frozen in sql/0028_pause_in_task_state.sql), its SCHEMA_SHA256
recorded.
"""

from pathlib import Path

from django.db import migrations, models

# store.schema_sql() as this migration applied it (frozen), and its sha256.
SCHEMA_FILE = Path(__file__).parent / "sql" / "0028_pause_in_task_state.sql"
SCHEMA_SHA256 = "a457208d2e35886cd84da5b7418353ecc049fcfce347ac168bce2c6c43a2c1ca"

# A task paused on either row was paused to the statements (they read "t.paused OR
# s.status = 'paused'"): it stays paused, with its time, author and note.
COPY_TO_STATE = """
UPDATE tasks_app_taskstate AS s
   SET status = 'paused', paused_at = t.paused_at, paused_by = t.paused_by,
       pause_note = t.pause_note
  FROM tasks_app_task AS t
 WHERE t.id = s.task_id AND t.paused
"""

COPY_TO_TASK = """
UPDATE tasks_app_task AS t
   SET paused = true, paused_at = s.paused_at, paused_by = s.paused_by,
       pause_note = s.pause_note
  FROM tasks_app_taskstate AS s
 WHERE t.id = s.task_id AND s.status = 'paused'
"""

# The functions as migration 0026 left them.
REVERSE = """
CREATE OR REPLACE FUNCTION tasks_app_status_after(
    t tasks_app_task, s tasks_app_taskstate, run_status text, leaving uuid
) RETURNS varchar LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN t.paused OR s.status = 'paused' THEN s.status
                WHEN tasks_app_other_running(t.id, leaving) THEN 'running'
                ELSE tasks_app_task_status(t, s.next_run_at, run_status) END
$$;
CREATE OR REPLACE FUNCTION tasks_app_status_on_create(
    t tasks_app_task, s tasks_app_taskstate
) RETURNS varchar LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN t.paused OR s.status = 'paused' THEN s.status
                WHEN s.status = 'running' AND tasks_app_other_running(t.id, NULL) THEN 'running'
                ELSE 'pending' END
$$;
CREATE OR REPLACE FUNCTION tasks_app_task_state_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tasks_app_taskstate (task_id, status, next_run_at, consecutive_failures, fire_count)
    VALUES (NEW.id, CASE WHEN NEW.paused THEN 'paused' ELSE 'created' END, NULL, 0, 0);
    RETURN NULL;
END
$$;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("tasks_app", "0027_alarms_in_task_state"),
    ]

    operations = [
        migrations.AddField(
            model_name="taskstate",
            name="paused_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="taskstate",
            name="paused_by",
            field=models.CharField(
                blank=True, db_default="", default="", editable=False, max_length=150
            ),
        ),
        migrations.AddField(
            model_name="taskstate",
            name="pause_note",
            field=models.TextField(blank=True, db_default="", default="", editable=False),
        ),
        migrations.RunSQL(COPY_TO_STATE, COPY_TO_TASK),
        # Before the columns go: no function reads them from then on.
        migrations.RunSQL(SCHEMA_FILE.read_text(encoding="utf-8"), REVERSE),
        migrations.RemoveIndex(model_name="task", name="task_paused_idx"),
        migrations.RemoveField(model_name="task", name="paused"),
        migrations.RemoveField(model_name="task", name="pause_note"),
        migrations.RemoveField(model_name="task", name="paused_at"),
        migrations.RemoveField(model_name="task", name="paused_by"),
        migrations.AddIndex(
            model_name="taskstate",
            index=models.Index(
                condition=models.Q(("status", "paused")),
                fields=["-paused_at", "task"],
                name="task_paused_idx",
            ),
        ),
    ]
