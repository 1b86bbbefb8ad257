"""E001 (the default database is not Postgres) and E002 (a server older than 14).
A project on SQLite, end to end: test_startproject.py."""

from __future__ import annotations

import pytest
from django.db import connection, connections

from tasks_app.checks import check_database_engine, check_postgres_version


def test_a_database_other_than_postgres_is_an_error_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(connection, "vendor", "sqlite")
    monkeypatch.setitem(connection.settings_dict, "ENGINE", "django.db.backends.sqlite3")

    [error] = check_database_engine()

    assert error.id == "tasks_app.E001" and error.is_serious()
    assert "DATABASES['default']['ENGINE'] is 'django.db.backends.sqlite3'" in error.msg
    assert '"django.db.backends.postgresql"' in str(error.hint)


def test_postgres_passes() -> None:
    assert check_database_engine() == []


def test_a_server_older_than_14_is_an_error_when_the_database_is_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Set where Django caches it (the wrapper's __dict__): reading it would connect.
    monkeypatch.setitem(connections["default"].__dict__, "pg_version", 130012)

    [error] = check_postgres_version(databases=["default"])

    assert error.id == "tasks_app.E002" and error.is_serious()
    assert "PostgreSQL 13.12" in error.msg and "DATABASES['default']" in error.msg
    # Plain `manage.py check` asks for no database: nothing is connected to nor reported.
    assert check_postgres_version(databases=None) == []


@pytest.mark.django_db
def test_the_real_server_passes() -> None:
    assert connection.pg_version >= 140000  # type: ignore[attr-defined]
    assert check_postgres_version(databases=["default"]) == []
