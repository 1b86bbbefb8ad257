-- The SQL the named statements (queries.sql) rely on: the rules a task's state follows, the
-- trigger that gives each new task its state row, and the one table of allowed run status
-- transitions, enforced by the database. Every definition is CREATE OR REPLACE, so the whole
-- file is applied again as it changes: a migration runs it (tasks_app.store.schema_sql), and
-- tests/store/test_schema.py fails while the migrated database differs from this file.
-- The placeholder in the last trigger is filled from tasks_app.store.RUN_TRANSITIONS when
-- the file is read.

-- The earliest due time of a task's waiting runs (pending or queued), not counting the run
-- ``leaving`` (NULL when none waits). A one-statement SQL table function, so that the
-- planner inlines it into the statement that reads it: it is planned and cached with that
-- statement, not run as a query of its own at every call.
CREATE OR REPLACE FUNCTION tasks_app_earliest_waiting(task varchar, leaving uuid)
RETURNS TABLE (due_at timestamptz) LANGUAGE sql STABLE AS $$
    SELECT min(w.due_at) FROM tasks_app_run AS w
     WHERE w.task_id = task AND w.status IN ('pending', 'queued')
       AND w.id IS DISTINCT FROM leaving
$$;

-- A task's next_run_at: a recurring task keeps its planned fire; any other shows its
-- earliest waiting run, ``waiting`` (tasks_app_earliest_waiting, passed as a sub-select:
-- it is read only for a task that is not recurring), counting the due time ``arriving``
-- of a run the calling statement inserts (a statement does not see its own changes).
-- Inlined into the calling statement, like the rules below.
DROP FUNCTION IF EXISTS tasks_app_next_run_at(tasks_app_task, tasks_app_taskstate, uuid, timestamptz);
CREATE OR REPLACE FUNCTION tasks_app_next_run_at(
    t tasks_app_task, s tasks_app_taskstate, waiting timestamptz, arriving timestamptz
) RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN t.schedule_type IN ('interval', 'cron') THEN s.next_run_at
                ELSE LEAST(arriving, waiting) END
$$;

-- A recurring task's next fire when its schedule is saved: ``first_fire`` (computed by the
-- schedule arithmetic) when re-planned or not planned yet, else the fire it has; none once
-- the schedule has ended (max_runs fires recorded, or the fire past end_at).
CREATE OR REPLACE FUNCTION tasks_app_planned_fire(
    t tasks_app_task, s tasks_app_taskstate, replan boolean, first_fire timestamptz
) RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN NOT replan AND s.next_run_at IS NOT NULL THEN s.next_run_at
                WHEN t.max_runs IS NOT NULL AND s.fire_count >= t.max_runs THEN NULL
                WHEN t.end_at IS NOT NULL AND first_fire > t.end_at THEN NULL
                ELSE first_fire END
$$;

-- The one rule of a task's status: an unpaused task that is not running, whose next fire
-- is ``next_run_at`` and whose latest outcome is ``outcome`` (a run's final status, the
-- task's own status when nothing ended, NULL before any). A recurring task that will fire
-- again is pending; a run that could not start in time (expired) leaves its task failed;
-- otherwise the task shows the outcome, or created.
CREATE OR REPLACE FUNCTION tasks_app_task_status(
    t tasks_app_task, next_run_at timestamptz, outcome text
) RETURNS varchar LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN t.schedule_type IN ('interval', 'cron') AND next_run_at IS NOT NULL
                    THEN 'pending'
                WHEN outcome = 'expired' THEN 'failed'
                ELSE coalesce(outcome, 'created') END
$$;

-- The task's status once one of its runs ended ``run_status``: a paused task keeps its
-- status; otherwise tasks_app_task_status. A statement updating the state row reads the
-- task row without locking it: a pause committed meanwhile shows in the state row
-- (task_pause writes ``paused`` there), not in ``t``.
CREATE OR REPLACE FUNCTION tasks_app_status_after(
    t tasks_app_task, s tasks_app_taskstate, run_status text
) RETURNS varchar LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN t.paused OR s.status = 'paused' THEN s.status
                ELSE tasks_app_task_status(t, s.next_run_at, run_status) END
$$;

-- The status of an unpaused task read from its runs (on resume): running while one of its
-- runs is, pending while one waits, else tasks_app_task_status of its latest ended run.
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

-- Every task has its state row, whichever way the task was inserted.
CREATE OR REPLACE FUNCTION tasks_app_task_state_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tasks_app_taskstate (task_id, status, next_run_at, consecutive_failures, fire_count)
    VALUES (NEW.id, CASE WHEN NEW.paused THEN 'paused' ELSE 'created' END, NULL, 0, 0);
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER tasks_app_task_state AFTER INSERT ON tasks_app_task
    FOR EACH ROW EXECUTE FUNCTION tasks_app_task_state_insert();

-- A run's status moves only along RUN_TRANSITIONS: any other change is refused by the
-- database, whoever writes it. The pairs are in the trigger's WHEN clause, evaluated without
-- calling a function, so an allowed change (every claim and completion) costs no call.
CREATE OR REPLACE FUNCTION tasks_app_run_transition_refused() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'run %: status % -> % is not an allowed transition',
        NEW.id, OLD.status, NEW.status
        USING ERRCODE = 'check_violation', HINT = 'tasks_app.store.RUN_TRANSITIONS';
END
$$;

CREATE OR REPLACE TRIGGER tasks_app_run_transition BEFORE UPDATE OF status ON tasks_app_run
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status
          AND (OLD.status::text, NEW.status::text) NOT IN (('pending', 'cancelled'), ('pending', 'expired'), ('pending', 'queued'), ('pending', 'skipped'), ('queued', 'cancelled'), ('queued', 'expired'), ('queued', 'failed'), ('queued', 'pending'), ('queued', 'running'), ('queued', 'skipped'), ('running', 'completed'), ('running', 'failed'), ('running', 'interrupted'), ('running', 'retrying')))
    EXECUTE FUNCTION tasks_app_run_transition_refused();
