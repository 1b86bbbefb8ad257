"""The SQL the statements rely on lives in one file (tasks_app/store/schema.sql), applied by
the migrations: the migrated database holds exactly that file's functions and triggers."""

from __future__ import annotations

import hashlib
from importlib import import_module
from pathlib import Path

import pytest
from django.db import connection, transaction

from tasks_app import store

MIGRATIONS = Path(store.__file__).resolve().parents[1] / "migrations"

pytestmark = pytest.mark.django_db

DEFINITIONS = """
SELECT 'function ' || p.proname, pg_get_functiondef(p.oid)
  FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
 WHERE n.nspname = current_schema() AND p.proname LIKE 'tasks\\_app\\_%%'
UNION ALL
SELECT 'trigger ' || t.tgname, pg_get_triggerdef(t.oid)
  FROM pg_trigger AS t
 WHERE NOT t.tgisinternal AND t.tgname LIKE 'tasks\\_app\\_%%'
ORDER BY 1
"""


def definitions() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(DEFINITIONS)
        return dict(cursor.fetchall())


def test_the_migrated_database_holds_the_schema_file() -> None:
    migrated = definitions()
    assert {
        "function tasks_app_task_status",
        "function tasks_app_status_after",
        "function tasks_app_idle_status",
        "function tasks_app_next_run_at",
        "trigger tasks_app_run_transition",
        "trigger tasks_app_task_state",
    } <= set(migrated)
    with transaction.atomic():
        # Applied again as a migration applies it: a definition the file changed since the
        # last migration that applied it would differ (the change needs a migration).
        with connection.cursor() as cursor:
            for statement in connection.ops.prepare_sql_script(store.schema_sql()):
                cursor.execute(statement)
        reapplied = definitions()
        transaction.set_rollback(True)
    assert reapplied == migrated


def test_the_newest_migration_that_applies_the_schema_file_applies_it_as_it_is() -> None:
    """Deployed databases get a change of schema.sql only from a new migration: one that
    runs it again and records the file's hash."""
    recorded = [
        (path.stem, module.SCHEMA_SHA256)
        for path in sorted(MIGRATIONS.glob("[0-9]*.py"))
        if hasattr(module := import_module(f"tasks_app.migrations.{path.stem}"), "SCHEMA_SHA256")
    ]
    assert recorded, "no migration applies tasks_app/store/schema.sql"
    name, sha256 = recorded[-1]
    assert hashlib.sha256(store.schema_sql().encode()).hexdigest() == sha256, (
        f"schema.sql changed since migration {name} applied it: add a migration that runs "
        "store.schema_sql() again and records its SCHEMA_SHA256"
    )
