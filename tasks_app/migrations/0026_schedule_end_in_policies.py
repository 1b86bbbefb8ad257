"""Whether a schedule has ended (``max_runs`` fires recorded, a fire past ``end_at``) is
decided once, in ``tasks_app.timing.policies``: ``tasks_app_planned_fire`` stores the fire
it is given instead of deciding it again. store.schema_sql() as it then was applied again
(frozen in sql/0026_schedule_end_in_policies.sql), its SCHEMA_SHA256 recorded.
"""

from pathlib import Path

from django.db import migrations

# store.schema_sql() as this migration applied it (frozen), and its sha256.
SCHEMA_FILE = Path(__file__).parent / "sql" / "0026_schedule_end_in_policies.sql"
SCHEMA_SHA256 = "b40d55207b4f7a813e4137ebbb20917eab03873a895ae5eb8b79bcfb616e2124"

# The function as migration 0021 left it.
REVERSE = """
CREATE OR REPLACE FUNCTION tasks_app_planned_fire(
    t tasks_app_task, s tasks_app_taskstate, replan boolean, first_fire timestamptz
) RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN NOT replan AND s.next_run_at IS NOT NULL THEN s.next_run_at
                WHEN t.max_runs IS NOT NULL AND s.fire_count >= t.max_runs THEN NULL
                WHEN t.end_at IS NOT NULL AND first_fire > t.end_at THEN NULL
                ELSE first_fire END
$$;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("tasks_app", "0025_fold_enqueued_tasks"),
    ]

    operations = [
        migrations.RunSQL(SCHEMA_FILE.read_text(encoding="utf-8"), REVERSE),
    ]
