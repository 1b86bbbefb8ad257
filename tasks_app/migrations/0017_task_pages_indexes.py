"""Indexes for the task lists at 1,000,000 tasks: each filter in id order, the values in
use of action and queue, and pg_trgm trigram indexes for search on a fragment of an id or
a name (the expression Django's ``icontains`` compares: UPPER(col::text) LIKE '%X%').

Built with CREATE INDEX CONCURRENTLY (outside a transaction), so that a release on a large
site does not hold up beat and the workers, which write task states, while they build.
pg_trgm ships with Postgres and is a trusted extension: the database's owner may create it.
"""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models

TRIGRAM_INDEXES = {"task_id_trgm_idx": "id", "task_name_trgm_idx": "name"}


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('tasks_app', '0016_run_created_at_default_trigger_labels'),
    ]

    operations = [
        migrations.RunSQL(
            "CREATE EXTENSION IF NOT EXISTS pg_trgm", reverse_sql=migrations.RunSQL.noop
        ),
        *(
            migrations.RunSQL(
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON tasks_app_task "
                f"USING gin (upper({column}::text) gin_trgm_ops)",
                reverse_sql=f"DROP INDEX CONCURRENTLY IF EXISTS {name}",
            )
            for name, column in TRIGRAM_INDEXES.items()
        ),
        AddIndexConcurrently(
            model_name='task',
            index=models.Index(fields=['action', 'id'], name='task_action_idx'),
        ),
        AddIndexConcurrently(
            model_name='task',
            index=models.Index(fields=['queue', 'id'], name='task_queue_idx'),
        ),
        AddIndexConcurrently(
            model_name='task',
            index=models.Index(fields=['schedule_type', 'id'], name='task_schedule_type_idx'),
        ),
        AddIndexConcurrently(
            model_name='taskstate',
            index=models.Index(fields=['status', 'task'], name='task_state_status_idx'),
        ),
    ]
