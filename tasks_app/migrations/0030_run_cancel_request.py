"""A running run can be cancelled: ``Run.cancel_requested_at`` records when a person asked it
to stop, and ``running -> cancelled`` joins the allowed transitions (store.RUN_TRANSITIONS).
store.schema_sql() as it then was applied again (frozen in sql/0030_run_cancel_request.sql),
its SCHEMA_SHA256 recorded; going back applies 0028's copy again (0029 changed no SQL function).
"""

from pathlib import Path

from django.db import migrations, models

# store.schema_sql() as this migration applied it (frozen), and its sha256.
SCHEMA_FILE = Path(__file__).parent / "sql" / "0030_run_cancel_request.sql"
SCHEMA_SHA256 = "474591d1284071ed0bbf9d3585cd31407850f6d0956748f5c5352ce7f496f0f2"
PREVIOUS = Path(__file__).parent / "sql" / "0028_pause_in_task_state.sql"


class Migration(migrations.Migration):
    dependencies = [
        ("tasks_app", "0029_run_action_requested_by"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="cancel_requested_at",
            field=models.DateTimeField(
                blank=True, help_text="When a person asked this running run to stop.", null=True
            ),
        ),
        migrations.RunSQL(
            SCHEMA_FILE.read_text(encoding="utf-8"), PREVIOUS.read_text(encoding="utf-8")
        ),
    ]
