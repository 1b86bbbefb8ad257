-- The SQL the named statements (queries.sql) rely on: the rules a task's state follows, the
-- trigger that gives each new task its state row, and the one table of allowed run status
-- transitions, enforced by the database. Every definition is CREATE OR REPLACE, so the whole
-- file is applied again as it changes: a migration runs it (tasks_app.store.schema_sql), and
-- tests/store/test_schema.py fails while the migrated database differs from this file.
-- The placeholder in the last function is filled from tasks_app.store.RUN_TRANSITIONS when
-- the file is read.

-- The earliest due time of a task's waiting runs (pending or queued), not counting the run
-- ``leaving`` (NULL when none waits). A one-statement SQL table function, so that the
-- planner inlines it into the statement that reads it: it is planned and cached with that
-- statement, not run as a query of its own at every call. No row when none waits (read
-- as a sub-select, that is NULL). The first row in index order rather than min(): the
-- planner turns a min() into the same index probe but wraps it in an init plan of its own,
-- which cost a claim and a completion about 0.01 ms of Postgres CPU each, measured.
CREATE OR REPLACE FUNCTION tasks_app_earliest_waiting(task varchar, leaving uuid)
RETURNS TABLE (due_at timestamptz) LANGUAGE sql STABLE AS $$
    SELECT w.due_at FROM tasks_app_run AS w
     WHERE w.task_id = task AND w.status IN ('pending', 'queued')
       AND w.id IS DISTINCT FROM leaving
     ORDER BY w.due_at
     LIMIT 1
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

-- A recurring task's next fire when its schedule is saved: ``first_fire`` when re-planned or
-- not planned yet, else the fire it has. ``first_fire`` comes from the schedule arithmetic
-- already bounded (NULL once the schedule has ended): whether a schedule has ended (max_runs
-- fires recorded, a fire past end_at) is decided in one place, tasks_app.timing.policies
-- (fire_within_bounds), which beat's plan uses too.
CREATE OR REPLACE FUNCTION tasks_app_planned_fire(
    t tasks_app_task, s tasks_app_taskstate, replan boolean, first_fire timestamptz
) RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN NOT replan AND s.next_run_at IS NOT NULL THEN s.next_run_at
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

-- Whether one of the task's runs other than ``leaving`` is running, read afresh: VOLATILE
-- (and PL/pgSQL, never inlined), so under READ COMMITTED its query takes a snapshot of its
-- own. When two runs of a task end at once, the second statement waits for the first's lock
-- on the task's state row and is evaluated again once the first commits: read with the
-- statement's own snapshot, the first run would still look running and the task would stay
-- running with nothing running. Through run_running_task_idx (a task's running runs).
CREATE OR REPLACE FUNCTION tasks_app_other_running(task varchar, leaving uuid)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM tasks_app_run AS r
                    WHERE r.task_id = task AND r.status = 'running'
                      AND r.id IS DISTINCT FROM leaving);
END
$$;

-- The task's status once one of its runs, ``leaving`` (NULL: already recorded as ended),
-- ended ``run_status``: a paused task keeps its status; a task with another run still
-- running stays running; otherwise tasks_app_task_status. The pause is read from the state
-- row only (its status ``paused``), the row a statement updates: a pause committed while
-- the statement waited for that row is seen when Postgres reads the row again.
DROP FUNCTION IF EXISTS tasks_app_status_after(tasks_app_task, tasks_app_taskstate, text);
CREATE OR REPLACE FUNCTION tasks_app_status_after(
    t tasks_app_task, s tasks_app_taskstate, run_status text, leaving uuid
) RETURNS varchar LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN s.status = 'paused' THEN s.status
                WHEN tasks_app_other_running(t.id, leaving) THEN 'running'
                ELSE tasks_app_task_status(t, s.next_run_at, run_status) END
$$;

-- The status of a task once a run of it is created: a paused task keeps its status, a
-- running one stays running while one of its runs is (the run created may be the next
-- attempt of the one that was), any other is pending.
CREATE OR REPLACE FUNCTION tasks_app_status_on_create(
    t tasks_app_task, s tasks_app_taskstate
) RETURNS varchar LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN s.status = 'paused' THEN s.status
                WHEN s.status = 'running' AND tasks_app_other_running(t.id, NULL) THEN 'running'
                ELSE 'pending' END
$$;

-- The status of an unpaused task read from its runs (on resume): running while one of its
-- runs is, pending while one waits, else tasks_app_task_status of its latest ended run.
CREATE OR REPLACE FUNCTION tasks_app_idle_status(
    t tasks_app_task, s tasks_app_taskstate
) RETURNS varchar LANGUAGE sql VOLATILE AS $$
    SELECT CASE
        WHEN tasks_app_other_running(t.id, NULL) THEN 'running'
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

-- Every task has its state row, whichever way the task was inserted: created, not paused
-- (a task is paused afterwards, by task_paused).
CREATE OR REPLACE FUNCTION tasks_app_task_state_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tasks_app_taskstate (task_id, status, next_run_at, consecutive_failures, fire_count)
    VALUES (NEW.id, 'created', NULL, 0, 0);
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER tasks_app_task_state AFTER INSERT ON tasks_app_task
    FOR EACH ROW EXECUTE FUNCTION tasks_app_task_state_insert();

-- A run's status moves only along RUN_TRANSITIONS: any other change is refused by the
-- database, whoever writes it. The table is in a PL/pgSQL function, compiled once per
-- session, and the trigger has no WHEN clause: Postgres reads a trigger's WHEN back from its
-- stored form and prepares it again for every statement, a cost that grows with the
-- clause. Measured in one Postgres session, an UPDATE of one row's status, committed: 14 us
-- without the trigger, 19 us with it, 62 us with the 14 pairs written in its WHEN clause.
CREATE OR REPLACE FUNCTION tasks_app_run_transition_check() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status::text <> NEW.status::text AND NOT (CASE OLD.status::text
        WHEN 'pending' THEN NEW.status::text IN ('cancelled', 'expired', 'queued', 'skipped')
        WHEN 'queued' THEN NEW.status::text IN ('cancelled', 'expired', 'failed', 'pending', 'running', 'skipped')
        WHEN 'running' THEN NEW.status::text IN ('cancelled', 'completed', 'failed', 'interrupted', 'retrying')
        ELSE false END) THEN
        RAISE EXCEPTION 'run %: status % -> % is not an allowed transition',
            NEW.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation', HINT = 'tasks_app.store.RUN_TRANSITIONS';
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER tasks_app_run_transition BEFORE UPDATE OF status ON tasks_app_run
    FOR EACH ROW EXECUTE FUNCTION tasks_app_run_transition_check();
