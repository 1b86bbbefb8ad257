"""The store reads and writes runs by column name: the columns an enqueue does not name take
their database default (db_default on the Run fields that lacked one). The release rule
(tasks_app_asked_by_person, tasks_app_releasable, tasks_app_released_status) and the expiry
rule (tasks_app_expires_at, tasks_app_deadline) as SQL functions: store.schema_sql() as it
then was applied again (frozen in sql/0034_store_by_name.sql), its SCHEMA_SHA256 recorded;
going back applies 0031's copy again.
"""

from pathlib import Path

from django.db import migrations, models

# store.schema_sql() as this migration applied it (frozen), and its sha256.
SCHEMA_FILE = Path(__file__).parent / "sql" / "0034_store_by_name.sql"
SCHEMA_SHA256 = "8972592907a1b1a6129dfbbcb86c41d7f6505c40c97726c59a28efd38bdcd668"
PREVIOUS = Path(__file__).parent / "sql" / "0031_flow_limits.sql"


class Migration(migrations.Migration):

    dependencies = [
        ('tasks_app', '0033_run_unique_key'),
    ]

    operations = [
        migrations.AlterField(
            model_name='run',
            name='attempt',
            field=models.PositiveIntegerField(db_default=1, default=1),
        ),
        migrations.AlterField(
            model_name='run',
            name='error',
            field=models.TextField(blank=True, db_default='', default=''),
        ),
        migrations.AlterField(
            model_name='run',
            name='output',
            field=models.TextField(blank=True, db_default='', default=''),
        ),
        migrations.AlterField(
            model_name='run',
            name='truncated',
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AlterField(
            model_name='run',
            name='worker',
            field=models.CharField(blank=True, db_default='', default='', max_length=200),
        ),
        migrations.RunSQL(
            SCHEMA_FILE.read_text(encoding="utf-8"), PREVIOUS.read_text(encoding="utf-8")
        ),
    ]
