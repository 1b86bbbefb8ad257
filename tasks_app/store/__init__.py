"""The only code that issues the named statements of ``queries.sql``, and the home of the
SQL they rely on (``schema.sql``: the task-status rule, the allowed run transitions).

Every status change of a run or of a task's state is one of these statements: the models
refuse an ORM write of a status at run time (``tasks_app.models.StatusWriteRefused``), and
the database refuses a run status change that is not in :data:`RUN_TRANSITIONS`.

``schema.sql`` is the editable source of the current schema; no migration reads it. Each
migration that applies the schema applies a frozen copy of :func:`schema_sql` as it was when
the migration was written (``tasks_app/migrations/sql/<migration>.sql``) and records its
``SCHEMA_SHA256``. A change to ``schema.sql`` or to :data:`RUN_TRANSITIONS` therefore ships
as a new numbered copy of :func:`schema_sql` in that folder (``manage.py shell -v 0 -c
"from tasks_app import store; print(store.schema_sql(), end='')"`` writes it) and a new
migration that applies it (as 0021 does); tests/store/test_schema.py fails until then.

A statement is run server-side bound (psycopg 3) on Django's connection, inside whatever
transaction is open there, and prepared once per connection: Postgres then plans each
statement once per connection, not once per run. psycopg ignores ``prepare=True`` while the
connection's ``prepare_threshold`` is ``None`` (Django's default), so the store sets one that
prepares its own statements only, unless the project's ``OPTIONS`` name a
``prepare_threshold`` (``None`` there: nothing is prepared, e.g. behind a pooler that cannot
keep prepared statements). Errors are Django's (``OperationalError``
when the database is away), as for the ORM.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Field, Model
from django.db.models.base import DEFERRED
from psycopg.types.json import Jsonb

from ..models import EXPLICIT_TRIGGERS, Run, RunStatus, Task, Trigger, allow_status_writes
from ..vocabulary.choices import REQUESTED_BY_CODE

__all__ = ["RUN_TRANSITIONS", "allow_status_writes", "schema_sql"]

QUERIES_FILE = Path(__file__).with_name("queries.sql")
SCHEMA_FILE = Path(__file__).with_name("schema.sql")

_S = RunStatus
# The one table of a run's status changes: {from: the statuses it may move to}. The database
# enforces it (the trigger tasks_app_run_transition in schema.sql); a final status moves
# nowhere. A new attempt (retry, interruption) is a new run, not a change of this one.
RUN_TRANSITIONS: dict[str, frozenset[str]] = {
    # released onto the broker; past its deadline; cancelled; a paused task's fire skipped
    _S.PENDING: frozenset({_S.QUEUED, _S.EXPIRED, _S.CANCELLED, _S.SKIPPED}),
    # claimed; back to pending (publish failed, message lost, held by a pause or overlap);
    # past its deadline; cancelled; skipped (pause, overlap); failed (the broker refused it)
    _S.QUEUED: frozenset({_S.RUNNING, _S.PENDING, _S.EXPIRED, _S.CANCELLED, _S.SKIPPED, _S.FAILED}),
    # its outcome, cut off by its worker's death, or stopped at a person's request
    _S.RUNNING: frozenset({_S.COMPLETED, _S.FAILED, _S.RETRYING, _S.INTERRUPTED, _S.CANCELLED}),
    **{final: frozenset() for final in _S if final not in (_S.PENDING, _S.QUEUED, _S.RUNNING)},
}
RUN_FIELDS: Sequence[Field[Any, Any]] = Run._meta.concrete_fields
TASK_FIELDS: Sequence[Field[Any, Any]] = Task._meta.concrete_fields
# The task's fields that executing a claimed run and recording its outcome read: the action
# and its payload, the time limit, the retry policy (and the deadline of a retry), the
# failure streak that pauses it. The claim returns only these, not the task's schedule,
# notes and timestamps, which every run would otherwise ship, convert and load for nothing;
# any other field loads on first access (Django's deferred fields).
_CLAIMED_TASK_FIELD_NAMES = {
    "id",
    "action",
    "payload",
    "timeout_seconds",
    "max_retries",
    "retry_backoff_seconds",
    "expires_after_seconds",
    "pause_after_failures",
    # flow control (services.flow): whether the claim is checked, and how
    "overlap_policy",
    "flow_key",
    "concurrency_limit",
    "concurrency_limit_per_key",
    "rate_limit",
    "rate_limit_per_key",
}
# In the model's order, as Django's deferred loading (Model.from_db) expects them.
CLAIMED_TASK_FIELDS: Sequence[Field[Any, Any]] = tuple(
    f for f in TASK_FIELDS if f.name in _CLAIMED_TASK_FIELD_NAMES
)
# The task's fields a run's message reads (dispatch.message_options).
MESSAGE_TASK_FIELDS: Sequence[Field[Any, Any]] = tuple(
    f for f in TASK_FIELDS if f.name in {"id", "queue", "priority", "timeout_seconds"}
)
# An enqueued run waits pending (beat releases it) when its task is paused, its queue is paused
# or it is due beyond the release horizon; else it is queued at once.
_HELD = (
    "(s.status = 'paused' "
    "OR EXISTS (SELECT FROM tasks_app_queuepause AS q "
    "WHERE q.queue = COALESCE(NULLIF(%(queue)s::varchar, ''), t.queue)) "
    "OR %(due_at)s::timestamptz > %(horizon_end)s::timestamptz)"
)
# A run enqueued by enqueue_run / enqueue_runs takes these from the call (its own bound
# parameters), its task row ``t``, the task's state row ``s`` (whether it is paused) and the
# statement's instants. Every other column is the model's default, written into the
# statement (``_enqueued_values``): a call binds and converts its own nine values, not the
# run's twenty-six columns.
_ENQUEUED_RUN_VALUES = {
    "id": "%(id)s::uuid",
    "task_id": "t.id",
    "trigger": f"'{Trigger.ENQUEUE.value}'",
    # The task row's own action (django_task: the statement's condition): read, not bound.
    "action": "t.action",
    "requested_by": f"'{REQUESTED_BY_CODE}'",
    "payload": "%(payload)s::jsonb",
    "queue": "%(queue)s::varchar",
    "priority": "%(priority)s::smallint",
    "due_at": "%(due_at)s::timestamptz",
    "scheduled_for": "%(due_at)s::timestamptz",
    "status": f"CASE WHEN {_HELD} THEN 'pending' ELSE 'queued' END",
    "queued_at": f"CASE WHEN {_HELD} THEN NULL ELSE %(created_at)s::timestamptz END",
    "created_at": "%(created_at)s::timestamptz",
    "expires_at": "%(due_at)s::timestamptz + t.expires_after_seconds * interval '1 second'",
}
_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def _aliased(alias: str, fields: Sequence[Field[Any, Any]]) -> str:
    return ", ".join(f'{alias}."{f.column}" AS "{alias}_{f.column}"' for f in fields)


def _enqueued_values(values: dict[str, str]) -> str:
    """The select list of an enqueued run: ``values`` where given, else the column's default."""
    return ", ".join(values.get(f.column) or _default_literal(f) for f in RUN_FIELDS)


def _default_literal(field: Field[Any, Any]) -> str:
    """``field``'s model default as an SQL constant of its column's type."""
    per_row = field.has_default() and callable(field.default)  # an id, an instant
    if per_row:
        raise ValueError(f"Run.{field.name} has a default per row; enqueues must bind it")
    value = field.get_default()
    if value is None:
        literal = "NULL"
    elif isinstance(value, bool | int):
        literal = str(value).lower()
    elif isinstance(value, str):
        literal = "'" + value.replace("'", "''") + "'"
    else:
        raise ValueError(f"Run.{field.name}: no SQL constant for its default {value!r}")
    return f"CAST({literal} AS {field.db_type(connection)})"


def _expand(sql: str) -> str:
    # A constant of the code, written into the statement rather than bound at every call.
    sql = sql.replace(
        "{explicit_triggers}", "ARRAY[" + ", ".join(f"'{t}'" for t in EXPLICIT_TRIGGERS) + "]"
    )
    sql = sql.replace("{run_columns}", ", ".join(f'"{f.column}"' for f in RUN_FIELDS))
    sql = sql.replace("{run_values}", ", ".join(f"%({f.column})s" for f in RUN_FIELDS))
    sql = sql.replace("{enqueued_run_values}", _enqueued_values(_ENQUEUED_RUN_VALUES))
    batch = _ENQUEUED_RUN_VALUES | {"id": "i.id", "payload": "p.payload"}
    sql = sql.replace("{enqueued_batch_values}", _enqueued_values(batch))
    for alias in set(re.findall(r"\{message_task_fields:(\w+)\}", sql)):
        sql = sql.replace(f"{{message_task_fields:{alias}}}", _aliased(alias, MESSAGE_TASK_FIELDS))
    for alias in set(re.findall(r"\{run_fields:(\w+)\}", sql)):
        sql = sql.replace(f"{{run_fields:{alias}}}", _aliased(alias, RUN_FIELDS))
    for alias in set(re.findall(r"\{claimed_task_fields:(\w+)\}", sql)):
        sql = sql.replace(f"{{claimed_task_fields:{alias}}}", _aliased(alias, CLAIMED_TASK_FIELDS))
    return sql


def parse(text: str) -> dict[str, str]:
    """``{name: statement}`` from ``-- name: <name>`` blocks (comment lines dropped)."""
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
        queries[name] = _expand("\n".join(lines).strip().rstrip(";"))
    return queries


@cache
def queries() -> dict[str, str]:
    return parse(QUERIES_FILE.read_text())


def schema_sql() -> str:
    """``schema.sql`` with :data:`RUN_TRANSITIONS` written into it: the schema as it is now,
    which the newest migration's frozen copy must equal (see the module docstring)."""
    arms = []
    for old, news in RUN_TRANSITIONS.items():
        if news:
            targets = ", ".join(f"'{new}'" for new in sorted(news))
            arms.append(f"WHEN '{old}' THEN NEW.status::text IN ({targets})")
    return SCHEMA_FILE.read_text().replace("{run_transitions}", "\n        ".join(arms))


# A connection's prepare_threshold that prepares the statements run with ``prepare=True``
# (the store's) at their first execution and, in practice, no ORM query (psycopg prepares a
# query after this many executions; Django's default, None, prepares nothing at all).
STATEMENTS_ONLY = 2**31 - 1


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


class _Loader:
    """How rows of ``fields`` become instances of ``model``, worked out once per field set
    (every claim loads two models this way): each field's database converters, and where
    each value goes among the model's concrete fields (the others deferred), so that
    ``Model.from_db`` gets a full row and does no look-ups of its own."""

    def __init__(self, model: type[Model], fields: Sequence[Field[Any, Any]]) -> None:
        concrete = list(model._meta.concrete_fields)
        self.fields = fields
        self.attnames = [f.attname for f in concrete]
        self.slots = [concrete.index(f) for f in fields]
        self.template: list[Any] = [DEFERRED] * len(concrete)
        self.converters = [
            (i, convert, field)
            for i, field in enumerate(fields)
            for convert in field.get_db_converters(connection)  # type: ignore[attr-defined]
        ]


_LOADERS: dict[tuple[type[Model], int], _Loader] = {}


def _loader(model: type[Model], fields: Sequence[Field[Any, Any]]) -> _Loader:
    found = _LOADERS.get((model, id(fields)))
    if found is None or found.fields is not fields:
        found = _LOADERS[(model, id(fields))] = _Loader(model, fields)
    return found


def to_model(model: type[Model], fields: Sequence[Field[Any, Any]], values: Sequence[Any]) -> Any:
    """A model instance from ``values`` in the order of ``fields`` (as the ORM loads one);
    the model's other fields are deferred."""
    if len(values) != len(fields):
        raise ValueError(f"{len(values)} values for {len(fields)} fields of {model.__name__}")
    loader = _loader(model, fields)
    converted = list(values)
    for i, convert, field in loader.converters:
        converted[i] = convert(converted[i], field, connection)
    row = loader.template.copy()
    for slot, value in zip(loader.slots, converted, strict=True):
        row[slot] = value
    return model.from_db(connection.alias, loader.attnames, row)


def run_params(run: Run) -> dict[str, Any]:
    """``{column: value}`` of a new run, as ``create_run`` takes them."""
    return {f.column: f.get_db_prep_save(f.pre_save(run, add=True), connection) for f in RUN_FIELDS}


def claimed_run(row: Sequence[Any]) -> Run:
    """The run (with its task's ``CLAIMED_TASK_FIELDS`` attached) from a ``claim_run`` row."""
    n = len(RUN_FIELDS)
    run: Run = to_model(Run, RUN_FIELDS, row[:n])
    run.task = to_model(Task, CLAIMED_TASK_FIELDS, row[n : n + len(CLAIMED_TASK_FIELDS)])
    return run


def message_task(values: Sequence[Any]) -> Task:
    """The task (its ``MESSAGE_TASK_FIELDS``) from the tail of an ``enqueue_run`` row."""
    task: Task = to_model(Task, MESSAGE_TASK_FIELDS, values)
    return task


def runs_rows(runs: Sequence[Run]) -> Jsonb:
    """New ``runs`` as ``insert_runs`` takes them: a JSON array of rows by column name."""
    return Jsonb(
        [{f.column: _json_value(f.pre_save(run, add=True)) for f in RUN_FIELDS} for run in runs]
    )


def _json_value(value: Any) -> Any:
    """A column's value as ``jsonb_populate_recordset`` reads it back."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value
