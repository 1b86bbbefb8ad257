"""The SQL the store's statements rely on, from its one schema file (tasks_app/store/schema.sql):
the task-status rule (``tasks_app_task_status``, which ``tasks_app_status_after`` and the new
``tasks_app_idle_status`` follow), the task-state trigger, and the trigger that refuses a run
status change outside ``tasks_app.store.RUN_TRANSITIONS``.

It applies the schema as it was when this migration was written, frozen in
``sql/0014_store_schema.sql`` (``store.schema_sql()`` then: the file with the transition table
written into it), never the schema file as it is now. A later change to the schema file (or to
the transition table) ships as a new frozen copy of ``store.schema_sql()`` under ``sql/`` and a
new migration that applies that copy and records its ``SCHEMA_SHA256``:
tests/store/test_schema.py fails until the newest frozen copy is the schema as it is."""

from importlib import import_module
from pathlib import Path

from django.db import migrations

STATE_0012 = import_module("tasks_app.migrations.0012_task_state")

# store.schema_sql() as this migration applied it (frozen), and its sha256.
SCHEMA_FILE = Path(__file__).parent / "sql" / "0014_store_schema.sql"
SCHEMA_SHA256 = "cc5527b501c5aef5ae602cbf478f7be5ccfb8271a97785593a986c48adbb7959"

REVERSE = f"""
DROP TRIGGER IF EXISTS tasks_app_run_transition ON tasks_app_run;
DROP FUNCTION IF EXISTS tasks_app_run_transition_refused();
DROP FUNCTION IF EXISTS tasks_app_run_transition_check();
DROP FUNCTION IF EXISTS tasks_app_idle_status(tasks_app_task, tasks_app_taskstate);
DROP FUNCTION IF EXISTS tasks_app_planned_fire(tasks_app_task, tasks_app_taskstate, boolean, timestamptz);
{STATE_0012.DROP}
DROP FUNCTION IF EXISTS tasks_app_task_status(tasks_app_task, timestamptz, text);
{STATE_0012.FUNCTIONS}
"""


class Migration(migrations.Migration):
    dependencies = [("tasks_app", "0013_status_width")]

    operations = [migrations.RunSQL(SCHEMA_FILE.read_text(encoding="utf-8"), REVERSE)]
