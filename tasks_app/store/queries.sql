-- The statements of a run's life, each named once and issued only by tasks_app.store.
-- Parameters are psycopg's %(name)s; each statement runs as written (in psql, with them
-- bound). Rows that stand for a run are read by column name (r.*; a task's columns as
-- "task.<column>"), and runs are inserted from JSON by column name
-- (jsonb_populate_record) or name the columns they set, the others taking the column's
-- default in the database (db_default): a column added to Run needs no change here.
-- Every status change is conditional on the status it leaves (docs/reliability.md), and the
-- task's state row (tasks_app_taskstate: status, next_run_at, failure streak, fire count)
-- follows the rules in the SQL functions of schema.sql (tasks_app_next_run_at, fed by
-- tasks_app_earliest_waiting; tasks_app_status_after, tasks_app_status_on_create and
-- tasks_app_idle_status, built on tasks_app_task_status and tasks_app_other_running): one
-- definition for every statement. A run's status moves only along store.RUN_TRANSITIONS,
-- which the database enforces. The task row itself (its configuration) is only read here,
-- never locked. A task is paused when its state row's status is 'paused', and only there
-- (task_paused writes it with when, by whom and why; task_resumed recomputes it): the
-- statements that update the state row test the status of the row they update, which
-- Postgres reads again when a pause committed while they waited for it.
-- The executor lock: the session that claims a run holds a session-level advisory lock keyed
-- on hashtextextended(<run id>::text, 0) until its completion releases it. Postgres drops it
-- the instant that session's connection dies, so a redelivered message can tell a dead
-- executor (lock free) from a live one (executor_gone).
-- A statement on one run by id guards the status it leaves with IS NOT DISTINCT FROM (the
-- same test on a NOT NULL column) rather than =: no index can serve that form, so the row is
-- always found by primary key. With "status = 'queued'", statistics that say queued runs are
-- rare (they are: most runs are finished) led the planner to run_status_due_idx, walking
-- every queued run per claim: a cost that grew with the backlog (tests/store/test_plans.py).

-- name: create_run
-- Insert a run (%(run)s: its row as JSON by column name) with its deadline
-- (tasks_app_deadline); its task's status follows (tasks_app_status_on_create) and its
-- next_run_at counts the run. Returns the deadline written.
WITH created AS (
    INSERT INTO tasks_app_run
    SELECT r.*
      FROM jsonb_populate_record(NULL::tasks_app_run, %(run)s::jsonb) AS g
      JOIN tasks_app_task AS t ON t.id = g.task_id
     CROSS JOIN LATERAL jsonb_populate_record(
           g, jsonb_build_object('expires_at', tasks_app_deadline(t, g))) AS r
    RETURNING task_id, due_at, expires_at
)
UPDATE tasks_app_taskstate AS s
   SET status = tasks_app_status_on_create(t, s),
       next_run_at = tasks_app_next_run_at(
           t, s, (SELECT w.due_at FROM tasks_app_earliest_waiting(t.id, NULL) AS w), c.due_at)
  FROM created AS c JOIN tasks_app_task AS t ON t.id = c.task_id
 WHERE s.task_id = c.task_id
RETURNING c.expires_at;

-- name: enqueue_run
-- A run of the @task function whose task is %(task_id)s (action django_task, its payload
-- naming %(path)s): inserted only if that task exists, with the task's deadline policy, and
-- already queued when it is due within the release horizon (%(horizon_end)s), the task is
-- not paused (its state row s) and the run's queue is not paused (tasks_app_queuepause), so the caller publishes it at commit without reading it
-- back. The task's state row is written only when its status or next_run_at changes (most
-- enqueues of a busy function change neither). No row when the task is missing or its
-- calls are deduplicated (unique_on: the caller takes services.unique_calls' way); else 1
-- (the runs inserted, as enqueue_runs answers), the run's status and the task's fields a
-- message needs ("task.<column>"). Its status is the release rule's (tasks_app_released_status);
-- the columns it does not name take their database default.
WITH task AS (
    SELECT t.id, t.action, tasks_app_expires_at(t, %(due_at)s::timestamptz) AS expires_at,
           tasks_app_released_status(
               t, s, %(trigger)s::varchar, %(queue)s::varchar, %(due_at)s::timestamptz,
               %(horizon_end)s::timestamptz) AS status
      FROM tasks_app_task AS t JOIN tasks_app_taskstate AS s ON s.task_id = t.id
     WHERE t.id = %(task_id)s::varchar AND t.action = 'django_task'
       AND t.payload->>'task' = %(path)s::text AND t.unique_on = ''
), created AS (
    INSERT INTO tasks_app_run (
        id, task_id, trigger, action, requested_by, payload, queue, priority, due_at,
        scheduled_for, status, queued_at, created_at, expires_at)
    SELECT %(id)s::uuid, k.id, %(trigger)s::varchar, k.action, %(requested_by)s::varchar,
           %(payload)s::jsonb, %(queue)s::varchar, %(priority)s::smallint, %(due_at)s::timestamptz,
           %(due_at)s::timestamptz, k.status,
           CASE WHEN k.status = 'queued' THEN %(created_at)s::timestamptz END,
           %(created_at)s::timestamptz, k.expires_at
      FROM task AS k
    RETURNING task_id, due_at, status
), moved AS (
    UPDATE tasks_app_taskstate AS s
       SET status = tasks_app_status_on_create(t, s),
           next_run_at = tasks_app_next_run_at(
               t, s, (SELECT w.due_at FROM tasks_app_earliest_waiting(t.id, NULL) AS w), c.due_at)
      FROM created AS c JOIN tasks_app_task AS t ON t.id = c.task_id
     WHERE s.task_id = c.task_id
       AND (s.status, s.next_run_at) IS DISTINCT FROM (
           tasks_app_status_on_create(t, s),
           tasks_app_next_run_at(
               t, s, (SELECT w.due_at FROM tasks_app_earliest_waiting(t.id, NULL) AS w), c.due_at))
)
SELECT 1 AS n, c.status, t.id AS "task.id", t.action AS "task.action",
       t.queue AS "task.queue", t.priority AS "task.priority",
       t.timeout_seconds AS "task.timeout_seconds"
  FROM created AS c JOIN tasks_app_task AS t ON t.id = c.task_id;

-- name: enqueue_runs
-- Runs of one @task function's task (as enqueue_run), one per element of %(ids)s and
-- %(payloads)s (a JSON array, in the same order), due together: one statement for a batch.
-- Returns how many were inserted, their status and the task's message fields (no row when
-- the task is missing). Kept apart from enqueue_run, which it could serve with one-element
-- arrays: binding the arrays, the join and the grouping make a single call through it
-- markedly slower, and a single call is the common enqueue.
WITH task AS (
    SELECT t.id, t.action, tasks_app_expires_at(t, %(due_at)s::timestamptz) AS expires_at,
           tasks_app_released_status(
               t, s, %(trigger)s::varchar, %(queue)s::varchar, %(due_at)s::timestamptz,
               %(horizon_end)s::timestamptz) AS status
      FROM tasks_app_task AS t JOIN tasks_app_taskstate AS s ON s.task_id = t.id
     WHERE t.id = %(task_id)s::varchar AND t.action = 'django_task'
       AND t.payload->>'task' = %(path)s::text AND t.unique_on = ''
), created AS (
    INSERT INTO tasks_app_run (
        id, task_id, trigger, action, requested_by, payload, queue, priority, due_at,
        scheduled_for, status, queued_at, created_at, expires_at)
    SELECT i.id, k.id, %(trigger)s::varchar, k.action, %(requested_by)s::varchar,
           p.payload, %(queue)s::varchar, %(priority)s::smallint, %(due_at)s::timestamptz,
           %(due_at)s::timestamptz, k.status,
           CASE WHEN k.status = 'queued' THEN %(created_at)s::timestamptz END,
           %(created_at)s::timestamptz, k.expires_at
      FROM task AS k,
           unnest(%(ids)s::uuid[]) WITH ORDINALITY AS i(id, n)
           JOIN jsonb_array_elements(%(payloads)s::jsonb) WITH ORDINALITY AS p(payload, n)
           USING (n)
    RETURNING task_id, due_at, status
), arrived AS (
    SELECT task_id, min(due_at) AS due_at, min(status) AS status, count(*) AS n
      FROM created GROUP BY task_id
), moved AS (
    UPDATE tasks_app_taskstate AS s
       SET status = tasks_app_status_on_create(t, s),
           next_run_at = tasks_app_next_run_at(
               t, s, (SELECT w.due_at FROM tasks_app_earliest_waiting(t.id, NULL) AS w), c.due_at)
      FROM arrived AS c JOIN tasks_app_task AS t ON t.id = c.task_id
     WHERE s.task_id = c.task_id
       AND (s.status, s.next_run_at) IS DISTINCT FROM (
           tasks_app_status_on_create(t, s),
           tasks_app_next_run_at(
               t, s, (SELECT w.due_at FROM tasks_app_earliest_waiting(t.id, NULL) AS w), c.due_at))
)
SELECT c.n, c.status, t.id AS "task.id", t.action AS "task.action",
       t.queue AS "task.queue", t.priority AS "task.priority",
       t.timeout_seconds AS "task.timeout_seconds"
  FROM arrived AS c JOIN tasks_app_task AS t ON t.id = c.task_id;

-- name: lock_unique_key
-- Inside the caller's transaction: the key %(key)s of task %(task_id)s held until it ends,
-- so the calls with one key decide one after another, each seeing what the one before it
-- wrote (services.unique_calls). run_unique_waiting_key refuses a second waiting run with
-- the key whatever happens; the lock makes the second call find the first's run instead
-- of failing, and guards a window, which no index can.
SELECT pg_advisory_xact_lock(
    hashtextextended('unique:' || %(task_id)s::text || ':' || %(key)s::text, 0));

-- name: unique_holder
-- The run holding key %(key)s of task %(task_id)s: its waiting run (pending or queued),
-- else, with a window (%(since)s not NULL), its latest run made since then whatever became
-- of it. Returns its id and whether it waits; nothing when the key is free. Read through
-- run_unique_key_idx.
SELECT id, status IN ('pending', 'queued')
  FROM tasks_app_run
 WHERE task_id = %(task_id)s::varchar AND unique_key = %(key)s::varchar
   AND (status IN ('pending', 'queued') OR created_at >= %(since)s::timestamptz)
 ORDER BY status IN ('pending', 'queued') DESC, created_at DESC
 LIMIT 1;

-- name: replace_run
-- pending/queued -> cancelled: a waiting run replaced by a newer call with its key (debounce),
-- its error naming the run that replaced it, %(by_run)s. A message already published for it
-- finds it cancelled and is dropped (claim_run: not_queued). Returns its task id, or
-- nothing if it had started meanwhile.
UPDATE tasks_app_run
   SET status = 'cancelled', finished_at = %(now)s,
       error = 'cancelled: replaced by run ' || %(by_run)s::text
 WHERE id = %(run_id)s
   AND (status IS NOT DISTINCT FROM 'pending' OR status IS NOT DISTINCT FROM 'queued')
RETURNING task_id;

-- name: insert_runs
-- Runs written whole by the caller (beat's fires, some already queued at the tick; a
-- backfill's runs), %(runs)s a JSON array of rows by column name: one statement per batch,
-- each with its deadline (tasks_app_deadline) and its status by the release rule
-- (tasks_app_released_status: queued at its created_at when due by %(horizon_end)s and
-- releasable; NULL: pending). A fire already recorded (run_unique_fire) is skipped, not an
-- error. Returns the ids inserted, their status and their deadline.
-- Each row's task is looked up by its key (the LIMIT keeps the planner from joining the
-- whole task table to a batch it cannot size: a tick reads the due tasks, not every one).
INSERT INTO tasks_app_run
SELECT r.*
  FROM jsonb_populate_recordset(NULL::tasks_app_run, %(runs)s::jsonb) AS g
 CROSS JOIN LATERAL (
       SELECT t, s FROM tasks_app_task AS t JOIN tasks_app_taskstate AS s ON s.task_id = t.id
        WHERE t.id = g.task_id LIMIT 1) AS k
 CROSS JOIN LATERAL tasks_app_released_status(
       k.t, k.s, g.trigger, g.queue, g.due_at, %(horizon_end)s::timestamptz) AS v(status)
 CROSS JOIN LATERAL jsonb_populate_record(
       g, jsonb_build_object(
           'expires_at', tasks_app_deadline(k.t, g), 'status', v.status,
           'queued_at', CASE WHEN v.status = 'queued' THEN g.created_at END)) AS r
ON CONFLICT DO NOTHING
RETURNING id, status, expires_at;

-- name: count_failure
-- One more failure in a row of the task's runs (the streak that pauses it at
-- pause_after_failures); returns the streak.
UPDATE tasks_app_taskstate SET consecutive_failures = consecutive_failures + 1
 WHERE task_id = %(task_id)s
RETURNING consecutive_failures;

-- name: cancel_requests
-- Of the runs %(run_ids)s a worker process holds, those a person asked to stop while they
-- run (request_cancel), with when: the process's lease keeper reads it every
-- TASKS_CANCEL_CHECK_SECONDS (by primary key; most calls find nothing).
SELECT id, cancel_requested_at FROM tasks_app_run
 WHERE id = ANY(%(run_ids)s::uuid[]) AND cancel_requested_at IS NOT NULL
   AND status IS NOT DISTINCT FROM 'running';

-- name: renew_leases
-- The lease (heartbeat_at) of the runs %(run_ids)s a worker process holds, pushed to %(now)s
-- while they are still running; the row count is how many were.
UPDATE tasks_app_run SET heartbeat_at = %(now)s
 WHERE id = ANY(%(run_ids)s::uuid[]) AND status IS NOT DISTINCT FROM 'running';

-- name: move_waiting_run
-- A 'once' task's waiting run moved to the task's new run_at (its deadline with it:
-- tasks_app_expires_at) while it is still pending; the row count says whether it was.
UPDATE tasks_app_run AS r
   SET due_at = %(due_at)s, scheduled_for = %(due_at)s,
       expires_at = tasks_app_expires_at(t, %(due_at)s)
  FROM tasks_app_task AS t
 WHERE r.id = %(run_id)s AND r.status IS NOT DISTINCT FROM 'pending' AND t.id = r.task_id;

-- name: claim_run
-- queued -> running, at or after its due instant (and the start a rate limit reserved for it,
-- not_before) and within its deadline, for an unpaused task (or a run a person asked for),
-- on a queue that is not paused (no tasks_app_queuepause row for the run's queue, its own or
-- its task's: whoever asked for it), when the task's overlap policy is allow or the caller
-- has checked it under the task's lock (overlap_checked), and its flow control lets it
-- start (tasks_app_flow_admits, asked last and only for a task that has flow control; its
-- verdict, kept for the refusal, is read back there: tasks_app_flow_refusal). The task becomes running. Its
-- next_run_at is computed
-- from the state row being updated (s in task_running), never from a row the claim read:
-- beat may have advanced a recurring task's next fire in between, and writing back the
-- value read would make beat record the same fires again. The claiming session takes the
-- run's executor lock. Returns the run (its key recorded) and the task's fields its
-- execution reads (as "task.<column>"), whether the lock was taken (false only on a
-- key collision) and a NULL refusal.
-- When it claims nothing, the one row says why (refused), with the run and those task
-- fields as the statement saw them (all NULL when the run is gone): 'gone', 'running',
-- 'not_queued' (another status, or moved by a statement that committed while this one
-- waited for the run's row: a duplicate message either way), 'expired' (past its
-- deadline), 'early' (its due instant, or its reserved start, not reached by %(now)s, the
-- database's clock as the caller read it: tasks_app.clock), 'paused' (its task paused, and
-- not a run a person asked for), 'queue_paused' (its queue paused: the run waits, pending,
-- until the queue is resumed), 'overlap' (another overlap policy, not checked yet), or the
-- flow control's verdict ('concurrency', 'line', 'rate:<epoch>'). The conditions of the
-- claim and the reasons are the same tests, so they are written side by side here and
-- nowhere else; the caller acts on the reason (worker.run_execution). The reason is
-- looked up only when the claim updated nothing, by the run's primary key.
-- The claim's transaction commits asynchronously (async_commit: SET LOCAL
-- synchronous_commit = off, as a function in the statement itself, so no extra round
-- trip): the broker keeps the run's message unacknowledged until the completion, which
-- commits durably, so a claim lost in a Postgres crash only lets the redelivered message
-- claim the run again (docs/reliability.md).
WITH async_commit AS (
    SELECT set_config('synchronous_commit', 'off', true)
), claimed AS (
    UPDATE tasks_app_run AS r
       SET status = 'running', started_at = %(now)s, heartbeat_at = %(now)s,
           worker = %(worker)s, flow_key = tasks_app_flow_key(t, COALESCE(r.payload, t.payload)),
           held = '',
           lateness_ms = round(extract(epoch FROM %(now)s - r.due_at) * 1000, 3)::float8
      FROM tasks_app_task AS t, tasks_app_taskstate AS s
     WHERE r.id = %(run_id)s AND r.status IS NOT DISTINCT FROM 'queued' AND t.id = r.task_id
       AND s.task_id = r.task_id
       AND (s.status <> 'paused' OR tasks_app_asked_by_person(r.trigger))
       AND NOT EXISTS (SELECT FROM tasks_app_queuepause AS q
                        WHERE q.queue = COALESCE(NULLIF(r.queue, ''), t.queue))
       AND (t.overlap_policy = 'allow' OR %(overlap_checked)s)
       AND (r.expires_at IS NULL OR r.expires_at >= %(now)s)
       AND r.due_at <= %(now)s AND (r.not_before IS NULL OR r.not_before <= %(now)s)
       AND CASE WHEN tasks_app_flow_controlled(t)
                THEN tasks_app_flow_admits(
                         t, r.id, tasks_app_flow_key(t, COALESCE(r.payload, t.payload)), r.held,
                         r.not_before, %(now)s)
                ELSE true END
 RETURNING r.*,
       t.id AS "task.id", t.action AS "task.action", t.payload AS "task.payload",
       t.timeout_seconds AS "task.timeout_seconds", t.max_retries AS "task.max_retries",
       t.retry_backoff_seconds AS "task.retry_backoff_seconds",
       t.expires_after_seconds AS "task.expires_after_seconds",
       t.pause_after_failures AS "task.pause_after_failures",
       t.overlap_policy AS "task.overlap_policy", t.flow_key AS "task.flow_key",
       t.concurrency_limit AS "task.concurrency_limit",
       t.concurrency_limit_per_key AS "task.concurrency_limit_per_key",
       t.rate_limit AS "task.rate_limit", t.rate_limit_per_key AS "task.rate_limit_per_key"
), task_running AS (
    UPDATE tasks_app_taskstate AS s
       SET status = 'running', next_run_at = tasks_app_next_run_at(
           t, s, (SELECT w.due_at FROM tasks_app_earliest_waiting(t.id, c.id) AS w), NULL)
      FROM claimed AS c JOIN tasks_app_task AS t ON t.id = c.task_id
     WHERE s.task_id = c.task_id AND s.status <> 'paused'
), refused AS (
    SELECT r.*,
           t.id AS "task.id", t.action AS "task.action", t.payload AS "task.payload",
           t.timeout_seconds AS "task.timeout_seconds", t.max_retries AS "task.max_retries",
           t.retry_backoff_seconds AS "task.retry_backoff_seconds",
           t.expires_after_seconds AS "task.expires_after_seconds",
           t.pause_after_failures AS "task.pause_after_failures",
           t.overlap_policy AS "task.overlap_policy", t.flow_key AS "task.flow_key",
           t.concurrency_limit AS "task.concurrency_limit",
           t.concurrency_limit_per_key AS "task.concurrency_limit_per_key",
           t.rate_limit AS "task.rate_limit",
           t.rate_limit_per_key AS "task.rate_limit_per_key",
           NULL::boolean,
           CASE WHEN r.id IS NULL THEN 'gone'
                WHEN r.status IS NOT DISTINCT FROM 'running' THEN 'running'
                WHEN r.status IS DISTINCT FROM 'queued' THEN 'not_queued'
                WHEN r.expires_at < %(now)s THEN 'expired'
                WHEN r.due_at > %(now)s OR r.not_before > %(now)s THEN 'early'
                WHEN s.status = 'paused' AND NOT tasks_app_asked_by_person(r.trigger) THEN 'paused'
                WHEN EXISTS (SELECT FROM tasks_app_queuepause AS q
                              WHERE q.queue = COALESCE(NULLIF(r.queue, ''), t.queue))
                     THEN 'queue_paused'
                WHEN t.overlap_policy <> 'allow' AND NOT %(overlap_checked)s THEN 'overlap'
                ELSE coalesce(tasks_app_flow_refusal(r.id), 'not_queued') END
      FROM (SELECT) AS one
      LEFT JOIN tasks_app_run AS r ON r.id = %(run_id)s
      LEFT JOIN tasks_app_task AS t ON t.id = r.task_id
      LEFT JOIN tasks_app_taskstate AS s ON s.task_id = r.task_id
     WHERE NOT EXISTS (SELECT FROM claimed)
)
SELECT claimed.*, pg_try_advisory_lock(hashtextextended(claimed.id::text, 0)) AS locked,
       NULL::text AS refused
  FROM claimed CROSS JOIN async_commit
UNION ALL
SELECT * FROM refused;

-- name: overlap_lock
-- Inside the caller's transaction, after the run's own row: the task's row, so the overlap
-- verdicts of one task's runs are decided one after another (never two "nothing running").
SELECT id FROM tasks_app_task WHERE id = %(task_id)s FOR UPDATE;

-- name: overlap_verdict
-- The task's overlap policy (skip, buffer_one) at the instant run %(run_id)s (due
-- %(due_at)s) would start, read after overlap_lock: 'start' when no other run of the task is
-- running; else, with the running run's id, 'wait' (buffer_one and no earlier run waits:
-- back to pending, released again) or 'skip'. The one place the policy is decided.
WITH busy AS (
    SELECT id FROM tasks_app_run
     WHERE task_id = %(task_id)s AND status = 'running' AND id <> %(run_id)s
     LIMIT 1
)
SELECT CASE WHEN NOT EXISTS (SELECT FROM busy) THEN 'start'
            WHEN t.overlap_policy = 'buffer_one' AND NOT EXISTS (
                 SELECT FROM tasks_app_run AS w
                  WHERE w.task_id = t.id AND w.id <> %(run_id)s
                    AND w.status IN ('pending', 'queued') AND w.due_at < %(due_at)s)
                 THEN 'wait'
            ELSE 'skip' END AS verdict,
       (SELECT id FROM busy) AS busy
  FROM tasks_app_task AS t
 WHERE t.id = %(task_id)s;

-- name: complete_run
-- running -> completed with the run's output, or cancelled (output kept, error
-- %(cancelled_error)s) when a person asked it to stop before this statement: a cancel
-- request decides the run's end, whatever its action did after it. The task follows (its failure streak reset on a completion, a paused
-- task keeps its status and next_run_at, a task with another run running stays running).
-- Only the executor completes a run: its executor lock is released (whether the run was
-- still running or not). Returns the status written (NULL if the run was not running), and
-- whether runs of its task are held by flow control (run_held_idx): then the worker lets the
-- next go (services.flow).
WITH finished AS (
    UPDATE tasks_app_run
       SET status = CASE WHEN cancel_requested_at IS NULL THEN 'completed' ELSE 'cancelled' END,
           finished_at = %(now)s, output = %(output)s,
           truncated = %(truncated)s, result = %(result)s,
           error = CASE WHEN cancel_requested_at IS NULL THEN error
                        ELSE %(cancelled_error)s END
     WHERE id = %(run_id)s AND status IS NOT DISTINCT FROM 'running'
 RETURNING id, task_id, status
), task_done AS (
    UPDATE tasks_app_taskstate AS s
       SET status = tasks_app_status_after(t, s, f.status, f.id),
           next_run_at = CASE WHEN s.status = 'paused' THEN s.next_run_at
                              ELSE tasks_app_next_run_at(t, s, (
                                  SELECT w.due_at
                                    FROM tasks_app_earliest_waiting(t.id, NULL) AS w), NULL)
                         END,
           consecutive_failures = CASE WHEN f.status = 'completed' THEN 0
                                       ELSE s.consecutive_failures END
      FROM finished AS f JOIN tasks_app_task AS t ON t.id = f.task_id
     WHERE s.task_id = f.task_id
)
SELECT (SELECT status FROM finished),
       pg_advisory_unlock(hashtextextended(%(run_id)s::text, 0)),
       (SELECT CASE WHEN tasks_app_flow_controlled(t)
                    THEN EXISTS (SELECT 1 FROM tasks_app_run AS w
                                  WHERE w.task_id = f.task_id AND w.status = 'pending'
                                    AND w.held <> '')
                    ELSE false END
          FROM finished AS f JOIN tasks_app_task AS t ON t.id = f.task_id);

-- name: finish_run
-- running -> failed, retrying or interrupted with the error, or cancelled when a person
-- asked the run to stop (request_cancel) before this statement: then no new attempt
-- follows, whoever ends it (the action's error, its worker killed at the cancel's grace or
-- lost, the sweep). The executor (executor: true) releases its executor lock. Returns the
-- run's task id and the status written, NULLs if the run was no longer running.
WITH finished AS (
    UPDATE tasks_app_run
       SET status = CASE WHEN cancel_requested_at IS NULL THEN %(status)s ELSE 'cancelled' END,
           finished_at = %(now)s, error = %(error)s
     WHERE id = %(run_id)s AND status IS NOT DISTINCT FROM 'running'
 RETURNING task_id, status
)
SELECT (SELECT task_id FROM finished), (SELECT status FROM finished),
       CASE WHEN %(executor)s THEN pg_advisory_unlock(hashtextextended(%(run_id)s::text, 0)) END;

-- name: executor_gone
-- Inside the caller's transaction: true if the run's executor lock is free (its executor's
-- session ended), taken then until the transaction ends so the executor cannot be
-- mid-completion; false while another session holds it; NULL when this very session holds
-- it (advisory locks are re-entrant, so that is looked up in pg_locks first).
WITH k AS (SELECT hashtextextended(%(run_id)s::text, 0) AS key)
SELECT CASE WHEN EXISTS (
                SELECT 1 FROM pg_locks AS l
                 WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid()
                   AND l.objsubid = 1 AND l.classid = ((k.key >> 32) & 4294967295)::oid
                   AND l.objid = (k.key & 4294967295)::oid)
            THEN NULL
            ELSE pg_try_advisory_xact_lock(k.key) END
  FROM k;

-- name: expire_runs
-- pending/queued -> expired, for those of the given runs past their deadline. Returns the
-- task id of each run expired.
UPDATE tasks_app_run AS r
   SET status = 'expired', finished_at = %(now)s,
       error = 'expired: could not start by '
               || to_char(r.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
 WHERE r.id = ANY(%(run_ids)s)
   AND (r.status IS NOT DISTINCT FROM 'pending' OR r.status IS NOT DISTINCT FROM 'queued')
   AND r.expires_at < %(now)s
RETURNING r.task_id;

-- name: refuse_runs
-- queued -> failed, for runs whose message the broker refused (publishing again cannot
-- succeed), each with its reason. Returns the task id of each run failed.
UPDATE tasks_app_run AS r
   SET status = 'failed', finished_at = %(now)s, error = v.error
  FROM unnest(%(run_ids)s::uuid[], %(errors)s::text[]) AS v(id, error)
 WHERE r.id = v.id AND r.status IS NOT DISTINCT FROM 'queued'
RETURNING r.task_id;

-- name: cancel_run
-- pending/queued -> cancelled. Returns the run's task id, or nothing if it had started.
UPDATE tasks_app_run
   SET status = 'cancelled', finished_at = %(now)s
 WHERE id = %(run_id)s
   AND (status IS NOT DISTINCT FROM 'pending' OR status IS NOT DISTINCT FROM 'queued')
RETURNING task_id;

-- name: request_cancel
-- A running run asked to stop at %(now)s (a second request keeps the first one's time): its
-- worker sees it (cancel_requests) and its end is recorded cancelled (complete_run,
-- finish_run). Returns when it was asked, or nothing if the run is not running.
UPDATE tasks_app_run
   SET cancel_requested_at = COALESCE(cancel_requested_at, %(now)s)
 WHERE id = %(run_id)s AND status IS NOT DISTINCT FROM 'running'
RETURNING cancel_requested_at;

-- name: release_lock
-- The release's lock, for this session until release_unlock: one release pass at a time (a
-- resumed queue's or task's, beat's), so runs released together go out in due order. With
-- %(wait)s the caller waits for it; without, true only if it was free (beat skips a pass).
SELECT CASE WHEN %(wait)s
            THEN (SELECT true FROM pg_advisory_lock(hashtextextended('tasks_app.release', 0)))
            ELSE pg_try_advisory_lock(hashtextextended('tasks_app.release', 0)) END;

-- name: release_unlock
SELECT pg_advisory_unlock(hashtextextended('tasks_app.release', 0));

-- name: release_due_runs
-- pending -> queued, for up to %(limit)s runs due by %(until)s (with %(fires_only)s, schedule
-- fires only) that may go onto the broker now: not held by flow control (admit_runs lets
-- those go) and releasable (tasks_app_releasable: the release rule), earliest first. Taken
-- FOR UPDATE SKIP LOCKED, so a run another release or an enqueue is publishing is left to
-- it. A run created while the release ran (after its now was read) is queued at its
-- creation, not before it. Returns each run with its task's fields its message reads; the
-- caller publishes them, in due order, once this commits.
WITH picked AS (
    SELECT r.id
      FROM tasks_app_run AS r
      JOIN tasks_app_task AS t ON t.id = r.task_id
      JOIN tasks_app_taskstate AS s ON s.task_id = r.task_id
     WHERE r.status = 'pending' AND r.held = '' AND r.due_at <= %(until)s
       AND (NOT %(fires_only)s OR r.trigger = 'schedule')
       AND tasks_app_releasable(t, s, r.trigger, r.queue)
     ORDER BY r.due_at
     LIMIT %(limit)s
       FOR UPDATE OF r SKIP LOCKED
)
UPDATE tasks_app_run AS r
   SET status = 'queued', queued_at = GREATEST(%(now)s, r.created_at)
  FROM picked AS p, tasks_app_task AS t
 WHERE r.id = p.id AND t.id = r.task_id
RETURNING r.*, t.id AS "task.id", t.action AS "task.action", t.queue AS "task.queue",
          t.priority AS "task.priority", t.timeout_seconds AS "task.timeout_seconds";

-- name: release_runs
-- release_due_runs for the given runs, whenever they are due (a caller publishing the runs
-- it just made, at commit).
WITH picked AS (
    SELECT r.id
      FROM tasks_app_run AS r
      JOIN tasks_app_task AS t ON t.id = r.task_id
      JOIN tasks_app_taskstate AS s ON s.task_id = r.task_id
     WHERE r.id = ANY(%(run_ids)s::uuid[]) AND r.status = 'pending' AND r.held = ''
       AND tasks_app_releasable(t, s, r.trigger, r.queue)
       FOR UPDATE OF r SKIP LOCKED
)
UPDATE tasks_app_run AS r
   SET status = 'queued', queued_at = GREATEST(%(now)s, r.created_at)
  FROM picked AS p, tasks_app_task AS t
 WHERE r.id = p.id AND t.id = r.task_id
RETURNING r.*, t.id AS "task.id", t.action AS "task.action", t.queue AS "task.queue",
          t.priority AS "task.priority", t.timeout_seconds AS "task.timeout_seconds";

-- name: held_for_rate
-- The task's runs held by its rate whose reserved start is by %(until)s (services.flow lets
-- them go for it); of a paused task (%(paused)s), only runs a person asked for.
SELECT id FROM tasks_app_run
 WHERE task_id = %(task_id)s AND status = 'pending' AND held = 'rate'
   AND not_before <= %(until)s
   AND (NOT %(paused)s OR tasks_app_asked_by_person(trigger));

-- name: unqueue_runs
-- queued -> pending, for those of the given runs still queued: their message did not go
-- out, was lost by the broker, or was declined for now (a paused task holds its delayed
-- runs, a paused queue all of its runs; overlap buffer_one); a later release publishes them again under the same id.
UPDATE tasks_app_run
   SET status = 'pending', queued_at = NULL
 WHERE id = ANY(%(run_ids)s) AND status IS NOT DISTINCT FROM 'queued';

-- name: hold_run
-- queued -> pending, held back by its task's flow control: %(held)s says why (concurrency:
-- until a slot frees; rate: until its reserved start %(not_before)s), with the run's key
-- (tasks_app_flow_key). The release does not publish a held run (run_pending_due_idx);
-- services.flow lets it go. Returns the key, nothing if the run was no longer queued.
UPDATE tasks_app_run AS r
   SET status = 'pending', queued_at = NULL, held = %(held)s, not_before = %(not_before)s,
       flow_key = tasks_app_flow_key(t, COALESCE(r.payload, t.payload))
  FROM tasks_app_task AS t
 WHERE r.id = %(run_id)s AND r.status IS NOT DISTINCT FROM 'queued' AND t.id = r.task_id
RETURNING r.flow_key;

-- name: flow_lock
-- Inside the caller's transaction: the task's flow lock (tasks_app_flow_lock), which its
-- claims take too: an admission counts the free slots with no claim in between.
SELECT tasks_app_flow_lock(%(task_id)s, NULL);

-- name: held_for_slots
-- Of the task's runs held for a concurrency slot, those that may take the %(free)s slots
-- free now: per key, its earliest held runs up to the key's free slots (%(key_limit)s less
-- its runs running or queued, NULL: no limit per key), taken round-robin between keys (a
-- key's first held run before any key's second), the key whose turn is oldest first,
-- then in due order. Read from the task's earliest %(window)s held runs (run_held_idx); of a
-- paused task (%(paused)s), only runs a person asked for.
WITH held AS (
    SELECT r.id, r.flow_key, r.due_at,
           row_number() OVER (PARTITION BY r.flow_key ORDER BY r.due_at, r.id) AS n
      FROM (SELECT id, flow_key, due_at FROM tasks_app_run
             WHERE task_id = %(task_id)s AND status = 'pending' AND held = 'concurrency'
               AND (NOT %(paused)s OR tasks_app_asked_by_person(trigger))
             ORDER BY due_at LIMIT %(window)s) AS r
), busy AS (
    SELECT flow_key, count(*) AS n FROM tasks_app_run
     WHERE task_id = %(task_id)s
       AND (status = 'running' OR (status = 'queued' AND due_at <= %(now)s))
     GROUP BY flow_key
)
SELECT h.id
  FROM held AS h
  LEFT JOIN busy AS b ON b.flow_key = h.flow_key
  LEFT JOIN tasks_app_flowkey AS k
         ON k.task_id = %(task_id)s AND k.per_key AND k.key = h.flow_key
 WHERE %(key_limit)s::integer IS NULL OR h.n + coalesce(b.n, 0) <= %(key_limit)s::integer
 ORDER BY h.n, k.last_turn_at NULLS FIRST, h.due_at
 LIMIT %(free)s;

-- name: admit_runs
-- pending -> queued, for held runs let go (services.flow), which keep their reason until
-- their claim: a run let go for a concurrency slot takes its turn ahead of the runs that
-- arrive meanwhile. The keys of those let go for a slot (of a task with a limit in all and
-- keys) have their turn, in the order of %(run_ids)s (held_for_slots' order): round-robin.
-- Returns the ids queued (the caller publishes them).
WITH admitted AS (
    UPDATE tasks_app_run SET status = 'queued', queued_at = GREATEST(%(now)s, created_at)
     WHERE id = ANY(%(run_ids)s::uuid[]) AND status IS NOT DISTINCT FROM 'pending'
       AND held <> ''
    RETURNING id, task_id, flow_key, held
), turns AS (
    INSERT INTO tasks_app_flowkey (task_id, per_key, key, last_turn_at)
    SELECT DISTINCT ON (a.task_id, a.flow_key)
           a.task_id, true, a.flow_key, %(now)s + i.n * interval '1 microsecond'
      FROM admitted AS a
      JOIN unnest(%(run_ids)s::uuid[]) WITH ORDINALITY AS i(id, n) ON i.id = a.id
      JOIN tasks_app_task AS t ON t.id = a.task_id
     WHERE a.held = 'concurrency' AND t.concurrency_limit IS NOT NULL AND t.flow_key <> ''
     ORDER BY a.task_id, a.flow_key, i.n DESC
    ON CONFLICT (task_id, per_key, key) DO UPDATE SET last_turn_at = EXCLUDED.last_turn_at
)
SELECT id FROM admitted;

-- name: skip_run
-- queued -> skipped with its reason (a paused task's fire, an overlap policy declining it).
UPDATE tasks_app_run
   SET status = 'skipped', finished_at = %(now)s, error = %(error)s
 WHERE id = %(run_id)s AND status IS NOT DISTINCT FROM 'queued';

-- name: skip_paused_fires
-- A task paused: its schedule fires already due but not started (pending or queued)
-- become skipped (pausing stops fires). Those not due yet are dropped (drop_fires_ahead).
UPDATE tasks_app_run
   SET status = 'skipped', finished_at = %(now)s, error = 'skipped: task paused'
 WHERE task_id = %(task_id)s AND trigger = 'schedule' AND status IN ('pending', 'queued')
   AND due_at <= %(now)s;

-- name: drop_fires_ahead
-- The given tasks were paused or their schedule changed: their schedule fires recorded
-- ahead of their instant (pending or queued, due after %(now)s) are removed, as if not
-- recorded yet. Each task's next fire goes back to the earliest fire removed and its fire
-- count down by the fires removed, so beat records them again from the task's current
-- definition (once it is resumed), or the re-planned schedule replaces them. A message
-- already published for a removed fire finds no run and is ignored. Called after the
-- task rows are written (locked), the order beat's firing takes them: task, runs, state.
WITH dropped AS (
    DELETE FROM tasks_app_run
     WHERE task_id = ANY(%(task_ids)s) AND trigger = 'schedule'
       AND status IN ('pending', 'queued') AND due_at > %(now)s
 RETURNING task_id, scheduled_for
), per_task AS (
    SELECT task_id, min(scheduled_for) AS first_fire, count(*) AS fires
      FROM dropped GROUP BY task_id
)
UPDATE tasks_app_taskstate AS s
   SET next_run_at = LEAST(s.next_run_at, p.first_fire),
       fire_count = GREATEST(s.fire_count - p.fires, 0)
  FROM per_task AS p
 WHERE s.task_id = p.task_id
RETURNING s.task_id;

-- name: task_paused
-- The task paused: the one place a pause is written, in its state row, at %(now)s by
-- %(by)s with %(note)s (a pause of a paused task replaces them).
UPDATE tasks_app_taskstate
   SET status = 'paused', paused_at = %(now)s, paused_by = %(by)s, pause_note = %(note)s
 WHERE task_id = %(task_id)s;

-- name: task_resumed
-- The task resumed: its status read from its runs (tasks_app_idle_status), its failure
-- streak reset, the pause's time, author and note cleared.
UPDATE tasks_app_taskstate AS s
   SET status = tasks_app_idle_status(t, s), consecutive_failures = 0,
       paused_at = NULL, paused_by = '', pause_note = ''
  FROM tasks_app_task AS t
 WHERE s.task_id = %(task_id)s AND t.id = s.task_id;

-- name: raise_schedule_error
-- Beat could not compute the task's fires: its state row is flagged with %(note)s (beat
-- skips the task until an edit clears it) and its alarm raised with the same reason.
UPDATE tasks_app_taskstate
   SET schedule_error = %(note)s, alarm_since = %(now)s, alarm_note = %(note)s
 WHERE task_id = %(task_id)s;

-- name: clear_schedule_errors
-- The given tasks were edited: their schedule-error flag and its alarm are cleared (beat
-- fires them again). The row count is how many were flagged.
UPDATE tasks_app_taskstate
   SET schedule_error = '', alarm_since = NULL, alarm_note = ''
 WHERE task_id = ANY(%(task_ids)s) AND schedule_error <> '';

-- name: raise_alarm
-- The task's missed-run alarm raised since %(now)s with %(note)s, unless it is already
-- raised; the row count says whether it was raised here.
UPDATE tasks_app_taskstate SET alarm_since = %(now)s, alarm_note = %(note)s
 WHERE task_id = %(task_id)s AND alarm_since IS NULL;

-- name: clear_alarms
-- The missed-run alarms of the given tasks cleared; a schedule error's alarm stays until
-- the task is edited (clear_schedule_errors). The row count is how many were cleared.
UPDATE tasks_app_taskstate SET alarm_since = NULL, alarm_note = ''
 WHERE task_id = ANY(%(task_ids)s) AND alarm_since IS NOT NULL AND schedule_error = '';

-- name: task_plan_fires
-- A recurring task's schedule saved: its next fire planned (tasks_app_planned_fire, from
-- %(first_fire)s when re-planned or unplanned), its status following it
-- (tasks_app_task_status) unless the task is paused or running. One statement on the locked
-- row, so a run finishing meanwhile is not overwritten by a status read before it.
UPDATE tasks_app_taskstate AS s
   SET next_run_at = tasks_app_planned_fire(t, s, %(replan)s, %(first_fire)s),
       status = CASE WHEN s.status IN ('paused', 'running') THEN s.status
                     ELSE tasks_app_task_status(
                         t, tasks_app_planned_fire(t, s, %(replan)s, %(first_fire)s), s.status)
                END
  FROM tasks_app_task AS t
 WHERE s.task_id = %(task_id)s AND t.id = s.task_id;

-- name: tasks_plan_fires
-- task_plan_fires for many tasks at once (``tasks sync``): %(fires)s is a JSON array of
-- {"id", "replan", "first_fire"}, each task planned the same way.
UPDATE tasks_app_taskstate AS s
   SET next_run_at = tasks_app_planned_fire(t, s, v.replan, v.first_fire),
       status = CASE WHEN s.status IN ('paused', 'running') THEN s.status
                     ELSE tasks_app_task_status(
                         t, tasks_app_planned_fire(t, s, v.replan, v.first_fire), s.status)
                END
  FROM jsonb_to_recordset(%(fires)s::jsonb) AS v(id varchar, replan boolean, first_fire timestamptz),
       tasks_app_task AS t
 WHERE s.task_id = v.id AND t.id = v.id;

-- name: task_after_run
-- Unpaused tasks once one of their runs ended with run_status (a run status: failed,
-- cancelled, expired), recorded by an earlier statement: status and next_run_at by the
-- shared rules.
UPDATE tasks_app_taskstate AS s
   SET status = tasks_app_status_after(t, s, %(run_status)s, NULL),
       next_run_at = tasks_app_next_run_at(
           t, s, (SELECT w.due_at FROM tasks_app_earliest_waiting(t.id, NULL) AS w), NULL)
  FROM tasks_app_task AS t
 WHERE s.task_id = ANY(%(task_ids)s) AND t.id = s.task_id
   AND s.status <> 'paused';

-- name: task_refresh_next_run
-- The task's next_run_at after its runs were moved (a replanned schedule).
UPDATE tasks_app_taskstate AS s
   SET next_run_at = tasks_app_next_run_at(
           t, s, (SELECT w.due_at FROM tasks_app_earliest_waiting(t.id, NULL) AS w), NULL)
  FROM tasks_app_task AS t
 WHERE s.task_id = %(task_id)s AND t.id = s.task_id;

-- name: advance_tasks
-- After a firing batch: each task's next fire, and how many fires it recorded.
UPDATE tasks_app_taskstate AS s
   SET next_run_at = v.next_run_at, fire_count = s.fire_count + v.fired
  FROM unnest(%(task_ids)s::varchar[], %(next_fires)s::timestamptz[], %(fired)s::integer[])
       AS v(id, next_run_at, fired)
 WHERE s.task_id = v.id;

-- name: prune_runs
-- Retention (services.runs_prune): deletes up to %(batch)s runs in status %(status)s due before
-- %(cutoff)s, oldest first, of any task but those in %(except_tasks)s (they keep their own
-- days), and their django-celery-results rows. Later attempts that pointed at a deleted run
-- lose that link (Django's SET_NULL, done here because the rows go in SQL). Rows another
-- session holds are left for the next batch. The row count is the runs deleted.
WITH doomed AS (
  SELECT id FROM tasks_app_run
   WHERE status = %(status)s AND due_at < %(cutoff)s
     AND NOT (task_id = ANY(%(except_tasks)s))
   ORDER BY due_at
   LIMIT %(batch)s
   FOR UPDATE SKIP LOCKED
), unlinked AS (
  UPDATE tasks_app_run SET first_attempt_id = NULL
   WHERE first_attempt_id IN (SELECT id FROM doomed) AND id NOT IN (SELECT id FROM doomed)
), results AS (
  DELETE FROM django_celery_results_taskresult
   WHERE task_id IN (SELECT id::text FROM doomed)
)
DELETE FROM tasks_app_run WHERE id IN (SELECT id FROM doomed);

-- name: prune_task_runs
-- Retention of one task with its own rule: deletes up to %(batch)s of its runs in
-- %(statuses)s due before %(cutoff)s, oldest first (run_task_due_idx), as prune_runs does.
WITH doomed AS (
  SELECT id FROM tasks_app_run
   WHERE task_id = %(task_id)s AND status = ANY(%(statuses)s) AND due_at < %(cutoff)s
   ORDER BY due_at
   LIMIT %(batch)s
   FOR UPDATE SKIP LOCKED
), unlinked AS (
  UPDATE tasks_app_run SET first_attempt_id = NULL
   WHERE first_attempt_id IN (SELECT id FROM doomed) AND id NOT IN (SELECT id FROM doomed)
), results AS (
  DELETE FROM django_celery_results_taskresult
   WHERE task_id IN (SELECT id::text FROM doomed)
)
DELETE FROM tasks_app_run WHERE id IN (SELECT id FROM doomed);

-- name: task_keep_count_cutoff
-- The due instant of a task's %(keep)s-th newest finished run: its runs due before it are
-- beyond the task's keep_runs_count. Nothing when it has no more than that.
SELECT due_at FROM tasks_app_run
 WHERE task_id = %(task_id)s AND status = ANY(%(statuses)s)
 ORDER BY due_at DESC
 OFFSET %(keep)s - 1 LIMIT 1;

-- name: prune_task_results
-- Retention of django-celery-results rows of their own (stock beat entries; a run's row goes
-- with the run): up to %(batch)s finished before their cutoff, failures after
-- %(failed_cutoff)s, others after %(cutoff)s.
DELETE FROM django_celery_results_taskresult
 WHERE id IN (
   SELECT id FROM django_celery_results_taskresult
    WHERE date_done < greatest(%(cutoff)s::timestamptz, %(failed_cutoff)s::timestamptz)
      AND date_done < CASE WHEN status = 'FAILURE' THEN %(failed_cutoff)s ELSE %(cutoff)s END
    ORDER BY date_done
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED);

-- name: tally_finished_runs
-- Runs finished in [%(since)s, %(until)s) by status, action and start-lateness bucket
-- (width_bucket: how many of %(edges)s the lateness reaches; NULL without a start), with the
-- lateness sum: what /metrics counts (services.run_tally), read through run_finished_idx.
SELECT r.status, t.action, width_bucket(r.lateness_ms, %(edges)s::float8[]) AS bucket,
       count(*), coalesce(sum(r.lateness_ms), 0)
  FROM tasks_app_run r JOIN tasks_app_task t ON t.id = r.task_id
 WHERE r.finished_at >= %(since)s AND r.finished_at < %(until)s
 GROUP BY 1, 2, 3;

-- name: fires_due_per_second
-- Tasks whose next fire (not recorded yet) is due by %(until)s, counted per second of it, in
-- time order: what beat has to record soon (beat.fire_ahead). The state rows alone, through
-- task_state_next_run_idx, at most %(limit)s of the earliest (a bounded read even with a
-- million schedules due after a downtime; beyond that the estimate is already "now").
SELECT date_trunc('second', d.next_run_at) AS second, count(*)
  FROM (SELECT next_run_at FROM tasks_app_taskstate
         WHERE next_run_at <= %(until)s AND status <> 'paused'
         ORDER BY next_run_at LIMIT %(limit)s) AS d
 GROUP BY 1 ORDER BY 1;

-- name: pending_fires_per_second
-- Schedule fires recorded and not yet published (pending) due by %(until)s, counted per
-- second of their due time, in time order, at most %(limit)s of the earliest, through
-- run_pending_due_idx (beat.fire_ahead).
SELECT date_trunc('second', d.due_at) AS second, count(*)
  FROM (SELECT due_at FROM tasks_app_run
         WHERE status = 'pending' AND trigger = 'schedule' AND due_at <= %(until)s
         ORDER BY due_at LIMIT %(limit)s) AS d
 GROUP BY 1 ORDER BY 1;

-- name: database_clock
-- The database's clock (tasks_app.clock reads it every TASKS_CLOCK_SYNC_SECONDS).
SELECT clock_timestamp();

-- name: ping
-- The health check's round trip.
SELECT 1;

-- name: table_estimate
-- Postgres' estimate of a table's rows (-1: never analysed): the paginator's count of a
-- long unfiltered list.
SELECT reltuples::bigint FROM pg_class WHERE oid = %(table)s::regclass;

-- name: start_tally_mark
-- The tally's mark row (services.run_tally), made at the epoch if it is missing.
INSERT INTO tasks_app_runtallymark (id, through) VALUES (1, %(epoch)s)
ON CONFLICT (id) DO NOTHING;

-- name: lateness_per_minute
-- Start lateness p50/p99 of the runs due in each minute from %(since)s to %(until)s that
-- have started, by due minute (an index range of run_due_idx whatever the history holds).
SELECT date_trunc('minute', due_at) AS minute,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY lateness_ms) AS p50,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY lateness_ms) AS p99,
       count(*) AS runs
  FROM tasks_app_run
 WHERE due_at >= %(since)s AND due_at <= %(until)s AND lateness_ms IS NOT NULL
 GROUP BY 1 ORDER BY 1;

-- name: sync_lock
-- Inside the caller's transaction: the lock of `tasks sync` (one sync at a time).
SELECT pg_advisory_xact_lock(%(key)s);

-- name: leader_lock
-- Beat's leadership, on a connection of its own: true if this session holds the lock.
SELECT pg_try_advisory_lock(%(key)s);

-- name: periodic_tasks_delete
-- django-celery-beat's entries %(ids)s deleted in one statement, without its signal that marks
-- PeriodicTasks changed once per entry (the caller marks it once: tasks_delete of a set).
DELETE FROM django_celery_beat_periodictask WHERE id = ANY(%(ids)s::integer[]);
