"""The two rules every statement that ends, starts or adds a run applies to its task, as SQL
functions so that each is written once (tasks_app/store/queries.sql calls them)."""

from django.db import migrations

FUNCTIONS = """
CREATE OR REPLACE FUNCTION tasks_app_next_run_at(
    t tasks_app_task, leaving uuid, arriving timestamptz
) RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
BEGIN
    -- A recurring task keeps its planned fire; any other shows its earliest waiting run
    -- (pending or queued), not counting the run ``leaving`` and counting the due time
    -- ``arriving`` of a run the calling statement inserts (a statement does not see its
    -- own changes).
    IF t.schedule_type IN ('interval', 'cron') THEN
        RETURN t.next_run_at;
    END IF;
    RETURN LEAST(arriving, (
        SELECT min(w.due_at) FROM tasks_app_run AS w
         WHERE w.task_id = t.id AND w.status IN ('pending', 'queued')
           AND w.id IS DISTINCT FROM leaving));
END
$$;

CREATE OR REPLACE FUNCTION tasks_app_status_after(t tasks_app_task, run_status text)
RETURNS varchar LANGUAGE sql IMMUTABLE AS $$
    -- The task's status once one of its runs ended ``run_status``: a paused task keeps its
    -- status; a recurring task that will fire again is back to pending.
    SELECT CASE WHEN t.paused THEN t.status
                WHEN t.schedule_type IN ('interval', 'cron') AND t.next_run_at IS NOT NULL
                    THEN 'pending'
                ELSE run_status END
$$;
"""

DROP = """
DROP FUNCTION IF EXISTS tasks_app_status_after(tasks_app_task, text);
DROP FUNCTION IF EXISTS tasks_app_next_run_at(tasks_app_task, uuid, timestamptz);
"""


class Migration(migrations.Migration):
    dependencies = [("tasks_app", "0003_run_task_fk_without_own_index")]

    operations = [migrations.RunSQL(FUNCTIONS, DROP)]
