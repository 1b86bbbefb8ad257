"""How the store runs a named statement of ``queries.sql`` and reads its rows; private to
``tasks_app.store`` (its typed functions are the face every other module calls).

A statement is run server-side bound (psycopg 3) on Django's connection, inside whatever
transaction is open there, and prepared once per connection: Postgres then plans each
statement once per connection, not once per run. psycopg ignores ``prepare=True`` while the
connection's ``prepare_threshold`` is ``None`` (Django's default), so the store sets one that
prepares its own statements only, unless the project's ``OPTIONS`` name a
``prepare_threshold`` (``None`` there: nothing is prepared, e.g. behind a pooler that cannot
keep prepared statements). Errors are Django's (``OperationalError`` when the database is
away), as for the ORM.

A statement's text is the file's as written (comment lines dropped): it runs in ``psql``
with its ``%(name)s`` parameters bound. Rows that stand for model instances are read by
their columns' names (``RETURNING r.*``, ``t.action AS "task.action"``): a column added to
``Run`` is in them without a change here.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Field, Model
from django.db.models.base import DEFERRED, ModelState

QUERIES_FILE = Path(__file__).with_name("queries.sql")
_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
# A connection's prepare_threshold that prepares the statements run with ``prepare=True``
# (the store's) at their first execution and, in practice, no ORM query (psycopg prepares a
# query after this many executions; Django's default, None, prepares nothing at all).
STATEMENTS_ONLY = 2**31 - 1


def parse(text: str) -> dict[str, str]:
    """``{name: statement}`` from ``-- name: <name>`` blocks (comment lines dropped)."""
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
        queries[name] = "\n".join(lines).strip().rstrip(";")
    return queries


@cache
def queries() -> dict[str, str]:
    return parse(QUERIES_FILE.read_text())


def _cursor(db: Any) -> psycopg.Cursor[Any]:
    db.close_if_health_check_failed()
    db.ensure_connection()
    conn = db.connection
    if conn.prepare_threshold is None and "prepare_threshold" not in db.settings_dict["OPTIONS"]:
        conn.prepare_threshold = STATEMENTS_ONLY
    return psycopg.Cursor(conn)


def fetch_one(name: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
    """Run statement ``name``; its first row, or ``None``."""
    db = connections[DEFAULT_DB_ALIAS]  # looked up once: each look-up goes through a Local
    with db.wrap_database_errors, _cursor(db) as cur:
        cur.execute(queries()[name], params, prepare=True)  # type: ignore[call-overload]
        return cur.fetchone()


def fetch_models(name: str, params: dict[str, Any]) -> tuple[Rows, list[tuple[Any, ...]]]:
    """Run statement ``name``; how to read its rows by column name, and its rows."""
    db = connections[DEFAULT_DB_ALIAS]
    with db.wrap_database_errors, _cursor(db) as cur:
        cur.execute(queries()[name], params, prepare=True)  # type: ignore[call-overload]
        return _rows(name, cur.description), cur.fetchall()


def fetch_all(name: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Run statement ``name``; all its rows."""
    db = connections[DEFAULT_DB_ALIAS]
    with db.wrap_database_errors, _cursor(db) as cur:
        cur.execute(queries()[name], params, prepare=True)  # type: ignore[call-overload]
        return cur.fetchall()


def execute(name: str, params: dict[str, Any]) -> int:
    """Run statement ``name``; how many rows it changed."""
    db = connections[DEFAULT_DB_ALIAS]
    with db.wrap_database_errors, _cursor(db) as cur:
        cur.execute(queries()[name], params, prepare=True)  # type: ignore[call-overload]
        return cur.rowcount


def run_sql(sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
    """Run ``sql`` (a statement of the store's that is not one of ``queries.sql``'s: its text
    is built from an identifier) unprepared through Django's cursor; its rows, if any."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


class _Loader:
    """How the columns ``names`` of a row become an instance of ``model``, worked out once
    per statement (every claim loads two models this way): each field's database
    converters, and where each value goes among the model's concrete fields (the others
    deferred), so that ``Model.from_db`` gets a full row and does no look-ups of its own."""

    def __init__(self, model: type[Model], names: Sequence[str], positions: Sequence[int]):
        concrete: list[Field[Any, Any]] = list(model._meta.concrete_fields)
        by_column = {f.column: i for i, f in enumerate(concrete)}
        self.model = model
        self.positions = positions
        self.attnames = [f.attname for f in concrete]
        self.slots = [by_column[name] for name in names]
        self.template: list[Any] = [DEFERRED] * len(concrete)
        self.converters = [
            (i, convert, concrete[slot])
            for i, slot in enumerate(self.slots)
            for convert in concrete[slot].get_db_converters(connection)  # type: ignore[attr-defined]
        ]

    def load(self, row: Sequence[Any]) -> Any:
        values = [row[p] for p in self.positions]
        for i, convert, field in self.converters:
            values[i] = convert(values[i], field, connection)
        full = self.template.copy()
        for slot, value in zip(self.slots, values, strict=True):
            full[slot] = value
        return self.model.from_db(connection.alias, self.attnames, full)


class Rows:
    """A statement's columns: a model's (``<column>``, or ``<prefix>.<column>`` for another
    model's) and its own values (any other name)."""

    def __init__(self, names: Sequence[str], models: Mapping[str, type[Model]]) -> None:
        self.index = {name: i for i, name in enumerate(names)}
        self.loaders: dict[str, _Loader] = {}
        for prefix, model in models.items():
            columns = {f.column for f in model._meta.concrete_fields}
            mine = [
                (i, name.removeprefix(prefix))
                for i, name in enumerate(names)
                if name.startswith(prefix) and name.removeprefix(prefix) in columns
            ]
            self.loaders[prefix] = _Loader(model, [c for _, c in mine], [i for i, _ in mine])

    def model(self, prefix: str, row: Sequence[Any]) -> Any:
        """The instance of the model read under ``prefix`` ('' for the row's own model)."""
        return self.loaders[prefix].load(row)

    def value(self, name: str, row: Sequence[Any]) -> Any:
        return row[self.index[name]]


_ROW_MODELS: dict[str, Mapping[str, type[Model]]] = {}
_ROWS: dict[tuple[str, tuple[str, ...]], Rows] = {}


def reads_models(name: str, models: Mapping[str, type[Model]]) -> None:
    """Declare that statement ``name``'s rows hold instances of ``models`` by prefix."""
    _ROW_MODELS[name] = models


def _rows(name: str, description: Any) -> Rows:
    names = tuple(d.name for d in description)
    found = _ROWS.get((name, names))
    if found is None:
        found = _ROWS[(name, names)] = Rows(names, _ROW_MODELS[name])
    return found


def saved(instance: Model) -> None:
    """Mark ``instance`` as a row the database holds (a statement wrote it, not the ORM)."""
    instance._state.adding, instance._state.db = False, DEFAULT_DB_ALIAS


def copy_with(instance: Model, **values: Any) -> Any:
    """A saved instance like ``instance`` but for ``values``: rows written by one statement
    differ in a few columns, so ``Model.__init__`` (every field's default worked out again)
    and the related-object descriptors are skipped."""
    state = ModelState()
    state.adding, state.db = False, instance._state.db
    state.fields_cache = dict(instance._state.fields_cache)
    twin = type(instance).__new__(type(instance))
    twin.__dict__ = {**instance.__dict__, "_state": state, **values}
    return twin


def db_values(instance: Model, fields: Sequence[Field[Any, Any]]) -> dict[str, Any]:
    """``{column: value}`` of a new instance as JSON (``jsonb_populate_record`` reads it)."""
    return {f.column: _json_value(f.pre_save(instance, add=True)) for f in fields}


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value
