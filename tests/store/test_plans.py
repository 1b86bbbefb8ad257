"""A statement on one run finds it, and its task, by primary key whatever the tables'
statistics say.

Most runs are finished, so the statistics say queued and running runs are rare; a plan that
reaches the run through ``run_status_due_idx`` then walks every queued (or running) run for
each claim and completion, a cost that grows with the backlog. And most deployments have a
few hundred tasks or fewer: priced with Postgres's default ``random_page_cost``, such a
table is cheaper to scan whole than to look up (``DATABASE_RANDOM_PAGE_COST``). The plan
checked is the generic one, which a worker's prepared statement uses after its first
executions.
"""

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tasks_app import store
from tasks_app.models import Run, Task

pytestmark = pytest.mark.django_db

# Each statement's parameters in the order of their first appearance, with their types.
TYPES = {
    "claim_run": {
        "now": "timestamptz",
        "run_id": "uuid",
        "overlap_checked": "boolean",
        "worker": "text",
        "explicit_triggers": "text[]",
    },
    "complete_run": {
        "now": "timestamptz",
        "output": "text",
        "truncated": "boolean",
        "result": "jsonb",
        "cancelled_error": "text",
        "run_id": "uuid",
    },
    "finish_run": {
        "status": "text",
        "now": "timestamptz",
        "error": "text",
        "run_id": "uuid",
        "executor": "boolean",
    },
    "cancel_run": {"now": "timestamptz", "run_id": "uuid"},
    "expire_runs": {"now": "timestamptz", "run_ids": "uuid[]"},
}
ARGS = {
    "timestamptz": "now()",
    "text": "'x'",
    "uuid": "'00000000-0000-0000-0000-000000000001'",
    "uuid[]": "'{00000000-0000-0000-0000-000000000001}'",
    "text[]": "'{manual}'",
    "boolean": "false",
    "jsonb": "NULL",
}

# Runs of the task {task} (an SQL expression over g, the row's number) in status %s, as many
# as the second parameter.
INSERT_RUNS = """INSERT INTO tasks_app_run (id, task_id, trigger, status, attempt, interruptions,
                     scheduled_for, due_at, created_at, worker, output, truncated, error)
                 SELECT gen_random_uuid(), {task}, 'api', %s, 1, 0, now(), now(), now(),
                        '', '', false, ''
                   FROM generate_series(1, %s) AS g"""


def _generic_plan(name: str) -> str:
    types = TYPES[name]
    order = list(types)
    sql = re.sub(r"%\((\w+)\)s", lambda m: f"${order.index(m[1]) + 1}", store.queries()[name])
    with connection.cursor() as cur:
        cur.execute(f"PREPARE plan_check ({', '.join(types.values())}) AS {sql}")
        cur.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        args = ", ".join(ARGS[t] for t in types.values())
        cur.execute(f"EXPLAIN (FORMAT JSON) EXECUTE plan_check ({args})")
        plan = json.dumps(cur.fetchone()[0])
        cur.execute("DEALLOCATE plan_check")
    return plan


def _statistics_say_rare(*statuses: str) -> None:
    """5,000 completed runs analyzed, then 2,000 runs in each of ``statuses`` the statistics
    do not know of: they say those statuses are rare."""
    Task.objects.create(id="plans", action="noop")
    with connection.cursor() as cur:
        cur.execute(INSERT_RUNS.format(task="'plans'"), ["completed", 5000])
        cur.execute("ANALYZE tasks_app_run")
        for status in statuses:
            cur.execute(INSERT_RUNS.format(task="'plans'"), [status, 2000])


@pytest.mark.parametrize("name", list(TYPES))
def test_a_run_is_found_by_primary_key_when_statistics_say_its_status_is_rare(name: str) -> None:
    _statistics_say_rare("queued", "running")
    plan = _generic_plan(name)
    assert "tasks_app_run_pkey" in plan
    assert "run_status_due_idx" not in plan, plan


@pytest.mark.parametrize("name", ["claim_run", "complete_run"])
def test_a_runs_task_is_found_by_primary_key_in_a_small_task_table(name: str) -> None:
    """200 tasks fill 5 pages; scanning them all for each claim and completion cost more
    than the run's own update (docs/benchmarks.md)."""
    with connection.cursor() as cur:
        # Fresh files (rolled back with the test): rows earlier tests rolled back would
        # otherwise leave the table bigger than its 200 tasks.
        cur.execute("TRUNCATE tasks_app_run, tasks_app_task CASCADE")
    Task.objects.bulk_create(
        [Task(id=f"small-{i:06d}", action="noop", queue="bench") for i in range(200)]
    )
    with connection.cursor() as cur:
        cur.execute(
            INSERT_RUNS.format(task="'small-' || lpad((g %% 200)::text, 6, '0')"),
            ["queued", 3000],
        )
        cur.execute("ANALYZE tasks_app_task")
        cur.execute("ANALYZE tasks_app_taskstate")
        cur.execute("ANALYZE tasks_app_run")
    plan = _generic_plan(name)
    assert '"Relation Name": "tasks_app_task"' in plan
    assert '"Relation Name": "tasks_app_taskstate"' in plan
    assert "Seq Scan" not in plan, plan


@pytest.mark.parametrize("status", ["pending", "queued", "running"])
def test_a_conditional_update_of_a_run_by_key_finds_it_by_key(status: str) -> None:
    """The services' guarded updates of one run (``status__still``, tasks_app.models.Still),
    e.g. a release flipping its runs to queued, a held run going back to pending."""
    _statistics_say_rare("pending", "queued", "running")
    run_id = "00000000-0000-0000-0000-000000000001"
    with CaptureQueriesContext(connection) as queries:
        Run.objects.filter(pk=run_id, status__still=status).update(queued_at=None)
    with connection.cursor() as cur:
        cur.execute(f"EXPLAIN (FORMAT JSON) {queries[0]['sql']}")
        plan = json.dumps(cur.fetchone()[0])
    assert "tasks_app_run_pkey" in plan, plan
    assert "run_pending_due_idx" not in plan and "run_task_waiting_idx" not in plan, plan


def test_whether_another_run_of_a_task_runs_is_read_from_its_running_runs_alone() -> None:
    """At every run's end (tasks_app_other_running): not by walking the task's history."""
    _statistics_say_rare("running")
    with connection.cursor() as cur:
        cur.execute("SELECT prosrc FROM pg_proc WHERE proname = 'tasks_app_other_running'")
        body = re.search(r"RETURN (EXISTS .*);", cur.fetchone()[0], re.S)[1]
        query = re.sub(r"\bleaving\b", "NULL::uuid", re.sub(r"\btask\b", "'plans'", body))
        cur.execute(f"EXPLAIN (FORMAT JSON) SELECT {query}")
        plan = json.dumps(cur.fetchone()[0])
    assert "run_running_task_idx" in plan, plan
