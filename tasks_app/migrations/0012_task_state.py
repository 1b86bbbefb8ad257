"""A task's engine state (status, next fire, failure streak, fire count) moves out of the task
row into its own narrow table, ``tasks_app_taskstate`` (``tasks_app.models.TaskState``):
every claim and completion rewrites it, and rewriting the wide task row re-evaluated its 28
check constraints each time. A trigger inserts a task's state row with the task. The two SQL
rules of migration 0004 take the state row beside the task's."""

from importlib import import_module

import django.db.models.deletion
from django.db import migrations, models

# The rules as 0004 defined them, restored if this migration is reversed.
RULES_0004 = import_module("tasks_app.migrations.0004_task_rules_in_sql").FUNCTIONS

FUNCTIONS = """
DROP FUNCTION IF EXISTS tasks_app_status_after(tasks_app_task, text);
DROP FUNCTION IF EXISTS tasks_app_next_run_at(tasks_app_task, uuid, timestamptz);

CREATE FUNCTION tasks_app_next_run_at(
    t tasks_app_task, s tasks_app_taskstate, leaving uuid, arriving timestamptz
) RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
BEGIN
    -- A recurring task keeps its planned fire; any other shows its earliest waiting run
    -- (pending or queued), not counting the run ``leaving`` and counting the due time
    -- ``arriving`` of a run the calling statement inserts (a statement does not see its
    -- own changes).
    IF t.schedule_type IN ('interval', 'cron') THEN
        RETURN s.next_run_at;
    END IF;
    RETURN LEAST(arriving, (
        SELECT min(w.due_at) FROM tasks_app_run AS w
         WHERE w.task_id = t.id AND w.status IN ('pending', 'queued')
           AND w.id IS DISTINCT FROM leaving));
END
$$;

CREATE FUNCTION tasks_app_status_after(
    t tasks_app_task, s tasks_app_taskstate, run_status text
) RETURNS varchar LANGUAGE sql IMMUTABLE AS $$
    -- The task's status once one of its runs ended ``run_status``: a paused task keeps its
    -- status; a recurring task that will fire again is back to pending. A statement
    -- updating the state row reads the task row without locking it: a pause committed
    -- meanwhile shows in the state row (task_pause writes ``paused`` there), not in ``t``.
    SELECT CASE WHEN t.paused OR s.status = 'paused' THEN s.status
                WHEN t.schedule_type IN ('interval', 'cron') AND s.next_run_at IS NOT NULL
                    THEN 'pending'
                ELSE run_status END
$$;

CREATE FUNCTION tasks_app_task_state_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tasks_app_taskstate (task_id, status, next_run_at, consecutive_failures, fire_count)
    VALUES (NEW.id, CASE WHEN NEW.paused THEN 'paused' ELSE 'created' END, NULL, 0, 0);
    RETURN NULL;
END
$$;

CREATE TRIGGER tasks_app_task_state AFTER INSERT ON tasks_app_task
    FOR EACH ROW EXECUTE FUNCTION tasks_app_task_state_insert();
"""

DROP = """
DROP TRIGGER IF EXISTS tasks_app_task_state ON tasks_app_task;
DROP FUNCTION IF EXISTS tasks_app_task_state_insert();
DROP FUNCTION IF EXISTS tasks_app_status_after(tasks_app_task, tasks_app_taskstate, text);
DROP FUNCTION IF EXISTS tasks_app_next_run_at(tasks_app_task, tasks_app_taskstate, uuid, timestamptz);
"""

COPY_STATE = """
INSERT INTO tasks_app_taskstate (task_id, status, next_run_at, consecutive_failures, fire_count)
SELECT id, status, next_run_at, consecutive_failures, fire_count FROM tasks_app_task
"""

COPY_BACK = """
UPDATE tasks_app_task AS t
   SET status = s.status, next_run_at = s.next_run_at,
       consecutive_failures = s.consecutive_failures, fire_count = s.fire_count
  FROM tasks_app_taskstate AS s
 WHERE s.task_id = t.id
"""


class Migration(migrations.Migration):
    dependencies = [("tasks_app", "0011_run_task_waiting_index")]

    operations = [
        # Reversed last, once the task's columns are back: 0004's rules read them.
        migrations.RunSQL(migrations.RunSQL.noop, RULES_0004),
        migrations.CreateModel(
            name="TaskState",
            fields=[
                (
                    "task",
                    models.OneToOneField(
                        editable=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="state",
                        serialize=False,
                        to="tasks_app.task",
                    ),
                ),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("created", "Created"),
                            ("pending", "Pending"),
                            ("running", "Running"),
                            ("completed", "Completed"),
                            ("failed", "Failed"),
                            ("paused", "Paused"),
                            ("cancelled", "Cancelled"),
                        ],
                        default="created",
                        max_length=10,
                    ),
                ),
                ("next_run_at", models.DateTimeField(blank=True, null=True)),
                ("consecutive_failures", models.IntegerField(default=0)),
                ("fire_count", models.IntegerField(default=0)),
            ],
            options={
                "indexes": [
                    models.Index(fields=["next_run_at"], name="task_state_next_run_idx")
                ],
            },
        ),
        migrations.RunSQL(COPY_STATE, COPY_BACK),
        migrations.RemoveIndex(model_name="task", name="task_due_fire_idx"),
        migrations.RemoveField(model_name="task", name="status"),
        migrations.RemoveField(model_name="task", name="next_run_at"),
        migrations.RemoveField(model_name="task", name="consecutive_failures"),
        migrations.RemoveField(model_name="task", name="fire_count"),
        migrations.RunSQL(FUNCTIONS, DROP),
    ]
