"""Indexes for django-celery-beat's *Periodic tasks* list, where every recurring task owns an
entry (600,000 entries among the benchmark's 1,000,000 tasks). Django's admin read the whole
table for three of the list's parts on every load; with these each is an index probe:

- its search (``name`` and ``task``, ``icontains``: UPPER(col::text) LIKE '%X%'): pg_trgm
  trigram indexes on those expressions, as for the tasks (migration 0017);
- its *task* filter's choices (the Celery task names in use): a B-tree on ``task``, read as
  a loose index scan (``selectors.values_in_use``) instead of ``SELECT DISTINCT``;
- its date drill-down on ``start_time`` (the earliest and latest, the years): a B-tree on
  the entries that have one (most have none).

The table is django-celery-beat's; the indexes are this app's (``tasks_app_`` names), built
with CREATE INDEX CONCURRENTLY so that beat and the services, which write entries, are not
held up while they build, and dropped on the way back.
"""

from django.db import migrations

TABLE = "django_celery_beat_periodictask"
INDEXES = {
    "tasks_app_entry_name_trgm_idx": "USING gin (upper(name::text) gin_trgm_ops)",
    "tasks_app_entry_task_trgm_idx": "USING gin (upper(task::text) gin_trgm_ops)",
    "tasks_app_entry_task_idx": "(task)",
    "tasks_app_entry_start_idx": "(start_time) WHERE start_time IS NOT NULL",
}


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ("tasks_app", "0021_run_running_task"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [
        migrations.RunSQL(
            "CREATE EXTENSION IF NOT EXISTS pg_trgm", reverse_sql=migrations.RunSQL.noop
        ),
        *(
            migrations.RunSQL(
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {TABLE} {spec}",
                reverse_sql=f"DROP INDEX CONCURRENTLY IF EXISTS {name}",
            )
            for name, spec in INDEXES.items()
        ),
    ]
