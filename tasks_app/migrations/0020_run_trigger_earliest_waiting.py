"""Less work for Postgres in a claim and a completion, as each prepares its statement:

- The run-transition trigger checks its pairs in a PL/pgSQL function
  (``tasks_app_run_transition_check``) and has no WHEN clause: Postgres reads a trigger's
  WHEN back from its stored form and prepares it for every statement, and the 14 pairs made
  that the largest cost of the trigger. The former function is dropped.
- ``tasks_app_earliest_waiting`` takes the first waiting run in index order instead of
  ``min()``, which the planner wraps in an init plan of its own.

store.schema_sql() as it then was applied again (frozen in
sql/0020_run_trigger_earliest_waiting.sql), its SCHEMA_SHA256 recorded.
"""

from pathlib import Path

from django.db import migrations

# store.schema_sql() as this migration applied it (frozen), and its sha256.
SCHEMA_FILE = Path(__file__).parent / "sql" / "0020_run_trigger_earliest_waiting.sql"
SCHEMA_SHA256 = "dcfc91e82686b8a6f52ee9b9a88ac8404c1adfd7f6d7f0383efeeb235a5718e6"

# The trigger as migration 0019 left it (the earlier tasks_app_earliest_waiting is as good).
REVERSE = """
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
          AND (OLD.status::text, NEW.status::text) NOT IN (
              ('pending', 'cancelled'), ('pending', 'expired'), ('pending', 'queued'),
              ('pending', 'skipped'), ('queued', 'cancelled'), ('queued', 'expired'),
              ('queued', 'failed'), ('queued', 'pending'), ('queued', 'running'),
              ('queued', 'skipped'), ('running', 'completed'), ('running', 'failed'),
              ('running', 'interrupted'), ('running', 'retrying')))
    EXECUTE FUNCTION tasks_app_run_transition_refused();
DROP FUNCTION IF EXISTS tasks_app_run_transition_check();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("tasks_app", "0019_bookkeeping"),
    ]

    operations = [
        migrations.RunSQL(
            SCHEMA_FILE.read_text(encoding="utf-8")
            + "\nDROP FUNCTION IF EXISTS tasks_app_run_transition_refused();",
            REVERSE,
        ),
    ]
