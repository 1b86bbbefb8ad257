"""The SQL the statements rely on: ``tasks_app/store/schema.sql`` is its editable source, and
migrations apply frozen copies of it.

Each migration that applies the schema applies ``store.schema_sql()`` as it was when the
migration was written, a file of its own under ``tasks_app/migrations/sql/`` (its
``SCHEMA_FILE``), and records that file's ``SCHEMA_SHA256``: an old migration replays what it
applied then, whatever ``schema.sql`` holds today. A change to ``schema.sql`` (or to
``store.RUN_TRANSITIONS``) therefore ships as a new numbered copy of ``store.schema_sql()`` in
that folder and a new migration that applies it; these tests fail until it does.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import uuid
from importlib import import_module
from pathlib import Path
from types import ModuleType
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from django.db import connection, transaction

from tasks_app import store
from tests import processes

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


def schema_migrations() -> list[ModuleType]:
    """The migrations that apply the schema (those that record a ``SCHEMA_SHA256``), in order."""
    modules = [
        import_module(f"tasks_app.migrations.{path.stem}")
        for path in sorted(MIGRATIONS.glob("[0-9]*.py"))
    ]
    return [module for module in modules if hasattr(module, "SCHEMA_SHA256")]


def applied_text(migration: ModuleType) -> str:
    """The frozen schema a migration applies, read as the migration reads it."""
    schema_file: Path = migration.SCHEMA_FILE
    return schema_file.read_text(encoding="utf-8")


def test_each_migration_applies_the_frozen_schema_it_recorded() -> None:
    """A frozen file is what its migration applied on every database migrated since: it is
    never edited (its hash is the one recorded then), and every file in the folder is some
    migration's."""
    migrations = schema_migrations()
    assert migrations, "no migration applies tasks_app/store/schema.sql"
    for migration in migrations:
        assert hashlib.sha256(applied_text(migration).encode()).hexdigest() == (
            migration.SCHEMA_SHA256
        ), f"{migration.SCHEMA_FILE} is not what {migration.__name__} applied: restore it"
    assert {m.SCHEMA_FILE.resolve() for m in migrations} == {
        path.resolve() for path in (MIGRATIONS / "sql").glob("*.sql")
    }


def test_the_newest_frozen_schema_is_the_schema_file_as_it_is() -> None:
    """Deployed databases get a change of schema.sql only from a new migration, which applies
    a new frozen copy of store.schema_sql()."""
    newest = schema_migrations()[-1]
    assert applied_text(newest) == store.schema_sql(), (
        f"schema.sql (or store.RUN_TRANSITIONS) changed since {newest.__name__} froze it: copy "
        "store.schema_sql() into a new tasks_app/migrations/sql/<migration>.sql and add the "
        "migration that applies it and records its SCHEMA_SHA256"
    )


def _database_url(name: str) -> str:
    """The URL of database ``name`` on the test database's server."""
    return urlunsplit(urlsplit(processes.test_database_url())._replace(path=f"/{name}"))


def test_a_database_migrated_from_zero_holds_the_schema_file() -> None:
    """``manage.py migrate`` on an empty database, every migration replaying its frozen SQL,
    leaves exactly the functions and triggers that ``store.schema_sql()`` defines."""
    name = f"tasks_migrate_{uuid.uuid4().hex[:10]}"
    server = _database_url("postgres")
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        done = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--no-input"],
            cwd=processes.ROOT,
            env=processes.process_env(DATABASE_URL=_database_url(name)),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"migrate failed:\n{done.stdout}\n{done.stderr}"
        with psycopg.connect(_database_url(name)) as conn:
            migrated: dict[str, str] = dict(conn.execute(DEFINITIONS).fetchall())
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    assert {
        "function tasks_app_task_status",
        "function tasks_app_status_after",
        "function tasks_app_idle_status",
        "function tasks_app_next_run_at",
        "trigger tasks_app_run_transition",
        "trigger tasks_app_task_state",
    } <= set(migrated)
    with transaction.atomic():
        # The schema as it is, applied on the test database as a migration applies SQL.
        with connection.cursor() as cursor:
            for statement in connection.ops.prepare_sql_script(store.schema_sql()):
                cursor.execute(statement)
        current = definitions()
        transaction.set_rollback(True)
    assert migrated == current
