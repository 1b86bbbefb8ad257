"""The store: the only code that touches SQL, called by name and type.

Every statement of ``queries.sql`` has one function here, its arguments named, its answer a
small type (a model instance, a named tuple, a count): no caller builds SQL, names a
statement or reads a row by position. ``schema.sql`` holds the SQL they rely on: the task
status rules, the release rule (``tasks_app_releasable``), the expiry rule
(``tasks_app_expires_at``), flow control's verdict and the allowed run transitions.

Every status change of a run or of a task's state is one of these statements: the models
refuse an ORM write of a status at run time (``tasks_app.models.StatusWriteRefused``), and
the database refuses a run status change that is not in :data:`RUN_TRANSITIONS`.

A statement's rows are read by column name (``_engine.Rows``) and new runs are written from
their model by column name (``jsonb_populate_record``), or name the columns they set and
leave the others to their database default (``db_default``): adding a column to ``Run`` is
a change of ``models.py`` (and its migration) alone (tests/store/test_new_column.py).

``schema.sql`` is the editable source of the current schema; no migration reads it. Each
migration that applies the schema applies a frozen copy of :func:`schema_sql` as it was when
the migration was written (``tasks_app/migrations/sql/<migration>.sql``) and records its
``SCHEMA_SHA256``. A change to ``schema.sql`` or to :data:`RUN_TRANSITIONS` therefore ships
as a new numbered copy of :func:`schema_sql` in that folder (``manage.py shell -v 0 -c
"from tasks_app import store; print(store.schema_sql(), end='')"`` writes it) and a new
migration that applies it (as 0021 does); tests/store/test_schema.py fails until then.
How a statement runs (prepared, on Django's connection and transaction): ``_engine``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple
from uuid import UUID

from django.db import connection
from psycopg.types.json import Jsonb

from ..models import Run, RunStatus, Task, Trigger, allow_status_writes
from ..vocabulary.choices import EXPLICIT_TRIGGERS, REQUESTED_BY_CODE
from . import _engine
from ._engine import fetch_all, fetch_models, fetch_one, queries, reads_models, run_sql

__all__ = ["RUN_TRANSITIONS", "allow_status_writes", "queries", "schema_sql"]

SCHEMA_FILE = Path(__file__).with_name("schema.sql")

# -- the database -----------------------------------------------------------------------


def database_clock() -> datetime:
    """The database's ``clock_timestamp()``."""
    row = _one("database_clock")
    assert row is not None
    return row[0]


def ping() -> None:
    """One round trip to the database (the health check)."""
    _one("ping")


def table_estimate(table: str) -> int:
    """Postgres' estimate of ``table``'s rows (``-1``: never analysed)."""
    row = _one("table_estimate", table=table)
    return int(row[0]) if row else -1


def sync_lock(*, key: int) -> None:
    """The lock of ``tasks sync`` until the transaction ends."""
    _one("sync_lock", key=key)


def leader_lock(conn: Any, *, key: int) -> bool:
    """Beat's leadership lock taken on ``conn`` (a psycopg connection of its own)."""
    row = conn.execute(queries()["leader_lock"], {"key": key}).fetchone()
    return bool(row and row[0])


def leader_ping(conn: Any) -> None:
    """A round trip on the leader's connection: still connected, so still holding it."""
    conn.execute(queries()["ping"])


def periodic_tasks_delete(*, ids: Sequence[int]) -> int:
    """Delete beat entries ``ids`` in one statement, without django-celery-beat's signal (the
    caller marks ``PeriodicTasks`` changed once); how many were deleted."""
    return _execute("periodic_tasks_delete", ids=list(ids)) if ids else 0


def start_tally_mark(*, epoch: datetime) -> None:
    _execute("start_tally_mark", epoch=epoch)


class MinuteLateness(NamedTuple):
    minute: datetime
    p50: float
    p99: float
    runs: int


def lateness_per_minute(*, since: datetime, until: datetime) -> list[MinuteLateness]:
    rows = fetch_all("lateness_per_minute", {"since": since, "until": until})
    return [MinuteLateness(m, float(p50), float(p99), n) for m, p50, p99, n in rows]


# A loose index scan: the smallest value, then repeatedly the next one above it, each one
# probe of the column's index; ``SELECT DISTINCT`` would read every row. Built per table and
# column (identifiers cannot be bound), so not one of queries.sql's statements.
_VALUES_IN_USE_SQL = """
WITH RECURSIVE v(value) AS (
    (SELECT {column} FROM {table} ORDER BY {column} LIMIT 1)
    UNION ALL
    SELECT (SELECT t.{column} FROM {table} t WHERE t.{column} > v.value
             ORDER BY t.{column} LIMIT 1)
      FROM v WHERE v.value IS NOT NULL
)
SELECT value FROM v WHERE value IS NOT NULL
"""


def values_in_use(table: str, column: str) -> list[Any]:
    """The distinct values of ``column`` of ``table`` in order, one index probe each."""
    quote = connection.ops.quote_name
    sql = _VALUES_IN_USE_SQL.format(table=quote(table), column=quote(column))
    return [row[0] for row in run_sql(sql)]


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


# Rows read as models: a run's columns by name, its task's as "task.<column>".
_RUN_AND_TASK = {"": Run, "task.": Task}
_TASK = {"task.": Task}
reads_models("claim_run", _RUN_AND_TASK)
reads_models("enqueue_run", _TASK)
reads_models("enqueue_runs", _TASK)
reads_models("release_due_runs", _RUN_AND_TASK)
reads_models("release_runs", _RUN_AND_TASK)
RUN_FIELDS = tuple(Run._meta.concrete_fields)
_RESULT = Run._meta.get_field("result")


def _execute(name: str, **params: Any) -> int:
    return _engine.execute(name, params)


def _one(name: str, **params: Any) -> tuple[Any, ...] | None:
    return fetch_one(name, params)


def _first_values(name: str, **params: Any) -> list[Any]:
    return [row[0] for row in fetch_all(name, params)]


def _run_with_task(rows: _engine.Rows, row: Sequence[Any]) -> Run:
    """The run of a row holding a run's columns and its task's (``"task.<column>"``)."""
    run: Run = rows.model("", row)
    run.task = rows.model("task.", row)
    return run


# -- runs: made -------------------------------------------------------------------------


def create_run(run: Run) -> Run:
    """Insert ``run`` (new, its fields set) with its deadline (``tasks_app_deadline``); its
    task's status and next_run_at follow. ``run`` is then saved, its deadline set."""
    row = _one("create_run", run=Jsonb(_engine.db_values(run, RUN_FIELDS)))
    run.expires_at = None if row is None else row[0]
    _engine.saved(run)
    return run


def insert_runs(runs: Sequence[Run], *, horizon_end: datetime | None) -> list[Run]:
    """Insert ``runs`` (beat's fires, a backfill's runs) in one statement, skipping fires
    already recorded, each queued when due by ``horizon_end`` and releasable (``None``: all
    pending); those inserted, their status and deadline set."""
    rows = Jsonb([_engine.db_values(run, RUN_FIELDS) for run in runs])
    written = {
        run_id: (status, expires_at)
        for run_id, status, expires_at in fetch_all(
            "insert_runs", {"runs": rows, "horizon_end": horizon_end}
        )
    }
    inserted = [run for run in runs if run.id in written]
    for run in inserted:
        run.status, run.expires_at = written[run.id]
        run.queued_at = run.created_at if run.status == RunStatus.QUEUED else None
        _engine.saved(run)
    return inserted


def enqueue_runs(
    *,
    task_id: str,
    path: str,
    ids: Sequence[UUID],
    payloads: Sequence[dict[str, Any]],
    queue: str,
    priority: int | None,
    due_at: datetime,
    now: datetime,
    horizon_end: datetime,
) -> list[Run] | None:
    """Runs of the ``@task`` function at ``path`` (its task ``task_id``), one per id and
    payload, due at ``due_at``: queued (published by the caller at commit) or pending by the
    release rule. ``None`` when the task is missing or deduplicates its calls."""
    params: dict[str, Any] = {
        "task_id": task_id,
        "path": path,
        "trigger": Trigger.ENQUEUE.value,
        "requested_by": REQUESTED_BY_CODE,
        "queue": queue,
        "priority": priority,
        "due_at": due_at,
        "created_at": now,
        "horizon_end": horizon_end,
    }
    if len(ids) == 1:  # the common call, without the batch's arrays and grouping
        name = "enqueue_run"
        params["id"], params["payload"] = ids[0], Jsonb(payloads[0])
    else:
        name = "enqueue_runs"
        params["ids"], params["payloads"] = list(ids), Jsonb(list(payloads))
    rows, found = fetch_models(name, params)
    if not found:
        return None
    row = found[0]
    status = rows.value("status", row)
    task: Task = rows.model("task.", row)
    first = Run(
        id=ids[0],
        task_id=task_id,
        trigger=Trigger.ENQUEUE,
        action=task.action,
        requested_by=REQUESTED_BY_CODE,
        status=status,
        due_at=due_at,
        scheduled_for=due_at,
        created_at=now,
        queued_at=now if status == RunStatus.QUEUED else None,
        payload=payloads[0],
        queue=queue,
        priority=priority,
    )
    first.task = task
    _engine.saved(first)
    return [first] + [
        _engine.copy_with(first, id=i, payload=p)
        for i, p in zip(ids[1:], payloads[1:], strict=True)
    ]


# -- runs: unique calls -----------------------------------------------------------------


class KeyHolder(NamedTuple):
    run_id: UUID
    waiting: bool


def lock_unique_key(*, task_id: str, key: str) -> None:
    """Hold the key of task ``task_id`` until the transaction ends."""
    _one("lock_unique_key", task_id=task_id, key=key)


def unique_holder(*, task_id: str, key: str, since: datetime | None) -> KeyHolder | None:
    """The run holding the key: its waiting run, else its latest since ``since``."""
    row = _one("unique_holder", task_id=task_id, key=key, since=since)
    return None if row is None else KeyHolder(*row)


def replace_run(*, run_id: UUID, by_run: UUID, now: datetime) -> str | None:
    """A waiting run cancelled, replaced by ``by_run``; its task id, ``None`` if it started."""
    row = _one("replace_run", run_id=run_id, by_run=str(by_run), now=now)
    return None if row is None else row[0]


# -- runs: a worker's -------------------------------------------------------------------


class Claim(NamedTuple):
    """A claim's answer: the run (claimed, or as the statement saw it; ``None`` if gone)
    with its task's fields its execution reads, and the reason it was not claimed."""

    run: Run | None
    refused: str | None


def claim_run(*, run_id: UUID, worker: str, now: datetime, overlap_checked: bool) -> Claim:
    """``queued → running`` by ``worker`` at ``now``, or why not (``claim_run``)."""
    params = {"run_id": run_id, "worker": worker, "now": now, "overlap_checked": overlap_checked}
    rows, (row,) = fetch_models("claim_run", params)  # one row: the claim or its refusal
    refused: str | None = rows.value("refused", row)
    if refused == "gone":
        return Claim(None, refused)
    return Claim(_run_with_task(rows, row), refused)


class Overlap(NamedTuple):
    verdict: str  # start, wait (back to pending) or skip
    busy: UUID | None  # the run of the task still running


def overlap_verdict(*, run_id: UUID, task_id: str, due_at: datetime) -> Overlap:
    """The task's overlap policy for a run about to start, under the task's row lock (taken
    here, held until the caller's transaction ends)."""
    _one("overlap_lock", task_id=task_id)
    row = _one("overlap_verdict", run_id=run_id, task_id=task_id, due_at=due_at)
    return Overlap("start", None) if row is None else Overlap(*row)


class Completion(NamedTuple):
    status: str | None  # None: the run was not running
    runs_held: bool  # runs of its task are held by flow control


def complete_run(
    *,
    run_id: UUID,
    now: datetime,
    output: str,
    truncated: bool,
    result: Any,
    cancelled_error: str,
) -> Completion:
    """``running → completed`` (``cancelled`` if asked to stop) with the run's outcome."""
    value = None if result is None else _RESULT.get_db_prep_save(result, connection)
    row = _one(
        "complete_run",
        run_id=run_id,
        now=now,
        output=output,
        truncated=truncated,
        result=value,
        cancelled_error=cancelled_error,
    )
    return Completion(None, False) if row is None else Completion(row[0], bool(row[2]))


class Finish(NamedTuple):
    task_id: str
    status: str


def finish_run(
    *, run_id: UUID, status: str, now: datetime, error: str, executor: bool
) -> Finish | None:
    """``running →`` ``status`` (``cancelled`` if asked to stop) with ``error``; ``None``
    if the run was no longer running."""
    row = _one("finish_run", run_id=run_id, status=status, now=now, error=error, executor=executor)
    return None if row is None or row[0] is None else Finish(row[0], row[1])


def executor_gone(*, run_id: UUID) -> bool | None:
    """Whether the run's executor lock is free (then held until the transaction ends);
    ``None`` if this session holds it."""
    row = _one("executor_gone", run_id=run_id)
    return None if row is None else row[0]


def count_failure(*, task_id: str) -> int | None:
    """One more failure in the task's streak; the streak."""
    row = _one("count_failure", task_id=task_id)
    return None if row is None else row[0]


def renew_leases(*, run_ids: Sequence[UUID | str], now: datetime) -> int:
    """The lease of the runs still running pushed to ``now``; how many were."""
    return _execute("renew_leases", run_ids=list(run_ids), now=now)


def cancel_requests(*, run_ids: Sequence[UUID | str]) -> dict[str, datetime]:
    """Of ``run_ids`` (running), those asked to stop, with when."""
    return {str(i): at for i, at in fetch_all("cancel_requests", {"run_ids": list(run_ids)})}


# -- runs: status changes ---------------------------------------------------------------


def skip_run(*, run_id: UUID, now: datetime, error: str) -> int:
    """``queued → skipped`` with its reason."""
    return _execute("skip_run", run_id=run_id, now=now, error=error)


def unqueue_runs(*, run_ids: Iterable[UUID]) -> int:
    """``queued → pending`` for those still queued."""
    return _execute("unqueue_runs", run_ids=list(run_ids))


def expire_runs(*, run_ids: Sequence[Any], now: datetime) -> list[str]:
    """``pending/queued → expired`` for those past their deadline; their task ids."""
    return _first_values("expire_runs", run_ids=list(run_ids), now=now)


def refuse_runs(*, errors: dict[UUID, str], now: datetime) -> list[str]:
    """``queued → failed`` with the broker's reason; their task ids."""
    return _first_values("refuse_runs", run_ids=list(errors), errors=list(errors.values()), now=now)


def cancel_run(*, run_id: UUID, now: datetime) -> str | None:
    """``pending/queued → cancelled``; its task id, ``None`` if it had started."""
    row = _one("cancel_run", run_id=run_id, now=now)
    return None if row is None else row[0]


def request_cancel(*, run_id: UUID, now: datetime) -> datetime | None:
    """A running run asked to stop; when it was first asked, ``None`` if not running."""
    row = _one("request_cancel", run_id=run_id, now=now)
    return None if row is None else row[0]


def move_waiting_run(*, run_id: UUID, due_at: datetime) -> bool:
    """A 'once' task's pending run moved to ``due_at``, its deadline with it."""
    return _execute("move_waiting_run", run_id=run_id, due_at=due_at) > 0


# -- release ----------------------------------------------------------------------------


def _released(name: str, params: dict[str, Any]) -> list[Run]:
    rows, found = fetch_models(name, params)
    return sorted((_run_with_task(rows, row) for row in found), key=lambda r: r.due_at)


def release_due_runs(
    *, until: datetime, now: datetime, limit: int, fires_only: bool = False
) -> list[Run]:
    """``pending → queued`` for up to ``limit`` releasable runs due by ``until`` (schedule
    fires only with ``fires_only``), in due order, each with its task's message fields."""
    params = {"until": until, "now": now, "limit": limit, "fires_only": fires_only}
    return _released("release_due_runs", params)


def release_runs(*, run_ids: Sequence[UUID], now: datetime) -> list[Run]:
    """``pending → queued`` for those of ``run_ids`` that are releasable, in due order."""
    return _released("release_runs", {"run_ids": list(run_ids), "now": now})


def release_lock(*, wait: bool) -> bool:
    """The release's lock for this session (waited for with ``wait``); whether it is held."""
    row = _one("release_lock", wait=wait)
    return bool(row and row[0])


def release_unlock() -> None:
    _one("release_unlock")


# -- flow control -----------------------------------------------------------------------


def hold_run(*, run_id: UUID, held: str, not_before: datetime | None) -> str | None:
    """``queued → pending``, held back by flow control; its key, ``None`` if not queued."""
    row = _one("hold_run", run_id=run_id, held=held, not_before=not_before)
    return None if row is None else row[0]


def flow_lock(*, task_id: str) -> None:
    """The task's flow lock until the transaction ends."""
    _one("flow_lock", task_id=task_id)


def held_for_slots(
    *, task_id: str, free: int, key_limit: int | None, window: int, now: datetime, paused: bool
) -> list[UUID]:
    """The held runs that may take the ``free`` slots, round-robin between keys."""
    return _first_values(
        "held_for_slots",
        task_id=task_id,
        free=free,
        key_limit=key_limit,
        window=window,
        now=now,
        paused=paused,
    )


def held_for_rate(*, task_id: str, until: datetime, paused: bool) -> list[UUID]:
    """The task's runs held by its rate whose reserved start is by ``until``."""
    return _first_values("held_for_rate", task_id=task_id, until=until, paused=paused)


def admit_runs(*, run_ids: Sequence[UUID], now: datetime) -> list[UUID]:
    """``pending → queued`` for held runs let go; the ids queued."""
    return _first_values("admit_runs", run_ids=list(run_ids), now=now)


# -- tasks' state -----------------------------------------------------------------------


def task_after_run(*, task_ids: Iterable[str], run_status: str) -> None:
    """Unpaused tasks' status and next_run_at after a run of theirs ended ``run_status``."""
    ids = list(task_ids)
    if ids:
        _execute("task_after_run", task_ids=ids, run_status=str(run_status))


def task_paused(*, task_id: str, now: datetime, by: str, note: str) -> None:
    _execute("task_paused", task_id=task_id, now=now, by=by, note=note)


def task_resumed(*, task_id: str) -> None:
    _execute("task_resumed", task_id=task_id)


def skip_paused_fires(*, task_id: str, now: datetime) -> int:
    return _execute("skip_paused_fires", task_id=task_id, now=now)


def drop_fires_ahead(*, task_ids: Sequence[str], now: datetime) -> int:
    return _execute("drop_fires_ahead", task_ids=list(task_ids), now=now)


def task_plan_fires(*, task_id: str, replan: bool, first_fire: datetime | None) -> None:
    _execute("task_plan_fires", task_id=task_id, replan=replan, first_fire=first_fire)


class PlannedFire(NamedTuple):
    task_id: str
    replan: bool
    first_fire: datetime | None


def tasks_plan_fires(fires: Sequence[PlannedFire]) -> None:
    """``task_plan_fires`` of many tasks in one statement."""
    rows = [
        {
            "id": f.task_id,
            "replan": f.replan,
            "first_fire": f.first_fire and f.first_fire.isoformat(),
        }
        for f in fires
    ]
    _execute("tasks_plan_fires", fires=json.dumps(rows))


def task_refresh_next_run(*, task_id: str) -> None:
    _execute("task_refresh_next_run", task_id=task_id)


class Advance(NamedTuple):
    task_id: str
    next_fire: datetime | None
    fired: int


def advance_tasks(advances: Sequence[Advance]) -> None:
    """Each task's next fire and how many fires it recorded, in one statement."""
    _execute(
        "advance_tasks",
        task_ids=[a.task_id for a in advances],
        next_fires=[a.next_fire for a in advances],
        fired=[a.fired for a in advances],
    )


def raise_schedule_error(*, task_id: str, note: str, now: datetime) -> None:
    _execute("raise_schedule_error", task_id=task_id, note=note, now=now)


def clear_schedule_errors(*, task_ids: Sequence[str]) -> int:
    return _execute("clear_schedule_errors", task_ids=list(task_ids))


def raise_alarm(*, task_id: str, note: str, now: datetime) -> bool:
    return _execute("raise_alarm", task_id=task_id, note=note, now=now) > 0


def clear_alarms(*, task_ids: Sequence[str]) -> int:
    return _execute("clear_alarms", task_ids=list(task_ids))


# -- retention --------------------------------------------------------------------------


def prune_runs(*, status: str, cutoff: datetime, except_tasks: Sequence[str], batch: int) -> int:
    return _execute(
        "prune_runs", status=status, cutoff=cutoff, except_tasks=list(except_tasks), batch=batch
    )


def prune_task_runs(*, task_id: str, statuses: Sequence[str], cutoff: datetime, batch: int) -> int:
    return _execute(
        "prune_task_runs", task_id=task_id, statuses=list(statuses), cutoff=cutoff, batch=batch
    )


def task_keep_count_cutoff(*, task_id: str, statuses: Sequence[str], keep: int) -> datetime | None:
    row = _one("task_keep_count_cutoff", task_id=task_id, statuses=list(statuses), keep=keep)
    return None if row is None else row[0]


def prune_task_results(*, cutoff: datetime, failed_cutoff: datetime, batch: int) -> int:
    return _execute("prune_task_results", cutoff=cutoff, failed_cutoff=failed_cutoff, batch=batch)


# -- reads ------------------------------------------------------------------------------


class Tally(NamedTuple):
    status: str
    action: str
    bucket: int | None
    runs: int
    lateness_ms: float


def tally_finished_runs(*, since: datetime, until: datetime, edges: Sequence[float]) -> list[Tally]:
    rows = fetch_all("tally_finished_runs", {"since": since, "until": until, "edges": list(edges)})
    return [Tally(*row) for row in rows]


class PerSecond(NamedTuple):
    second: datetime
    fires: int


def fires_due_per_second(*, until: datetime, limit: int) -> list[PerSecond]:
    return [
        PerSecond(*r) for r in fetch_all("fires_due_per_second", {"until": until, "limit": limit})
    ]


def pending_fires_per_second(*, until: datetime, limit: int) -> list[PerSecond]:
    rows = fetch_all("pending_fires_per_second", {"until": until, "limit": limit})
    return [PerSecond(*r) for r in rows]


def schema_sql() -> str:
    """``schema.sql`` with :data:`RUN_TRANSITIONS` and ``EXPLICIT_TRIGGERS`` written into it: the schema as it is now,
    which the newest migration's frozen copy must equal (see the module docstring)."""
    arms = []
    for old, news in RUN_TRANSITIONS.items():
        if news:
            targets = ", ".join(f"'{new}'" for new in sorted(news))
            arms.append(f"WHEN '{old}' THEN NEW.status::text IN ({targets})")
    triggers = ", ".join(f"'{t}'" for t in EXPLICIT_TRIGGERS)
    text = SCHEMA_FILE.read_text().replace("{explicit_triggers}", triggers)
    return text.replace("{run_transitions}", "\n        ".join(arms))
