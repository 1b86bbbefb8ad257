"""Runs: creation, the worker-side lifecycle (claim, complete, fail, retry), cancel, and
the recovery writes beat's sweep makes (expire, stalled, lost message).

Every status change is a conditional ``UPDATE ... WHERE status = <expected>``: whoever gets
there first (a worker finishing, the sweep declaring the run lost, a duplicate message) wins
and the others change nothing, so a run's state moves at most once along each edge even
though its message may be delivered more than once. See docs/reliability.md.
"""

from __future__ import annotations

import logging
import random
import time
import traceback
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.backends.postgresql.psycopg_any import is_psycopg3
from django.db.models import Case, CharField, F, Q, Value, When
from django.db.models.functions import Cast, Concat
from django.utils import timezone

from .. import actions, dispatch
from ..logs import run_log
from ..models import (
    RECURRING,
    OverlapPolicy,
    Run,
    RunStatus,
    Task,
    TaskStatus,
    Trigger,
    lateness_ms,
)
from .common import ConflictError, jsonable, next_run_at_expr

if is_psycopg3:
    import psycopg

log = logging.getLogger(__name__)
MAX_RETRY_DELAY_SECONDS = 3600
# The database is unreachable (restart, failover, network): worth waiting for, not a failure.
DB_ERRORS = (OperationalError, InterfaceError)


def run_cancel(*, run: Run) -> Run:
    """Cancel a run that has not started (``pending`` or ``queued``)."""
    now = timezone.now()
    changed = Run.objects.filter(
        pk=run.pk, status__in=[RunStatus.PENDING, RunStatus.QUEUED]
    ).update(status=RunStatus.CANCELLED, finished_at=now)
    run.refresh_from_db()
    if not changed:
        raise ConflictError(
            f"run {run.id} is {run.status}; only pending or queued runs can be cancelled"
        )
    task_after_run(run.task_id, TaskStatus.CANCELLED)
    return run


def run_retry(*, run: Run) -> Run:
    """A new attempt, due now, of a finished, unsuccessful run (``failed``, ``expired``,
    ``cancelled``), linked to the same first attempt.

    Only the latest attempt of a run can be retried, and the attempts of one run are
    serialized on its first attempt's row, so a double click makes one new attempt, not two
    (the second gets a :class:`ConflictError`).
    """
    if run.status not in (RunStatus.FAILED, RunStatus.EXPIRED, RunStatus.CANCELLED):
        raise ConflictError(
            f"run {run.id} is {run.status}; only failed, expired or cancelled runs can be retried"
        )
    first_id = run.first_attempt_id or run.id
    with transaction.atomic():
        list(Run.objects.select_for_update().filter(pk=first_id).values_list("pk", flat=True))
        latest = _last_attempt(run)
        if latest > run.attempt:
            raise ConflictError(f"run {run.id} was already retried (attempt {latest} exists)")
        now = timezone.now()
        return run_create(
            task=run.task,
            trigger=Trigger.RETRY,
            due_at=now,
            now=now,
            scheduled_for=run.scheduled_for,
            attempt=latest + 1,
            first_attempt_id=first_id,
        )


def run_execute(*, run_id: str, worker: str) -> Run | None:
    """Claim the run, call its action, record the outcome. ``None`` if not claimable.

    The claim is ``UPDATE ... WHERE status = 'queued'``: a redelivered or duplicated message
    for a run that already started, finished or was cancelled does nothing. The outcome is
    written with :func:`_persist`, which waits out a short database outage instead of
    losing it. While this runs, the caller renews the run's lease (``tasks_app.recovery``).
    """
    run = run_claim(run_id=run_id, worker=worker)
    if run is None:
        return None
    task = run.task
    ctx = actions.RunContext(
        run_id=str(run.id),
        task_id=task.id,
        attempt=run.attempt,
        scheduled_for=run.scheduled_for,
        due_at=run.due_at,
        timeout_seconds=task.timeout_seconds,
        first_attempt_id=str(run.first_attempt_id or run.id),
    )
    try:
        action = actions.get(task.action)
        outcome = action.func(dict(task.payload), ctx)
    except SoftTimeLimitExceeded:
        error = timed_out_error(task)
        return _persist(lambda: run_fail(run=run, error=error, retryable=True))
    except Exception as exc:  # the action's failure is the run's failure, never the worker's
        retryable = not isinstance(exc, actions.ActionError) or exc.retryable
        error = f"{type(exc).__name__}: {exc}\n\n{traceback.format_exc()}"
        return _persist(lambda: run_fail(run=run, error=error, retryable=retryable))
    if isinstance(outcome, actions.Outcome):
        output, result = outcome.output, outcome.result
    else:
        output, result = ("" if outcome is None else str(outcome)), None
    return _persist(lambda: run_complete(run=run, output=output, result=result))


def run_lost(*, run_id: str, error: str) -> Run | None:
    """The process executing a ``running`` run is gone (killed at its hard time limit, or
    its worker died): record ``error`` and retry or fail it by the task's retry policy.

    ``None`` if the run is not running any more (its outcome was already recorded).
    """
    run = Run.objects.select_related("task").filter(pk=run_id, status=RunStatus.RUNNING).first()
    if run is None:
        return None
    return run_fail(run=run, error=error, retryable=True)


def run_timeout_seconds(task: Task) -> int:
    """The task's time limit (the soft limit; the hard limit is a few seconds later)."""
    return int(task.timeout_seconds or settings.TASKS_DEFAULT_TIMEOUT_SECONDS)


def timed_out_error(task: Task, detail: str = "") -> str:
    text = f"timed out after {run_timeout_seconds(task)} s"
    return f"{text} ({detail})" if detail else text


def run_claim(*, run_id: str, worker: str) -> Run | None:
    """``queued → running`` (or ``queued → expired`` past the run's deadline).

    On Postgres the common case (task not paused, overlap ``allow``, deadline not passed) is
    one statement, :func:`_claim_fast`; when it claims nothing, the general path below decides
    (not queued, expired, paused, another overlap policy) exactly as it always has.
    """
    now = timezone.now()
    if connection.vendor == "postgresql":
        fast = _claim_fast(run_id, worker=worker, now=now)
        if fast is not None:
            run_log(log, fast).info("run started on %s", worker)
            return fast
    return _claim_general(run_id, worker=worker)


def _claim_general(run_id: str, *, worker: str) -> Run | None:
    run = Run.objects.select_related("task").filter(pk=run_id).first()
    if run is None or run.status != RunStatus.QUEUED:
        log.info("run %s is %s; message ignored", run_id, run.status if run else "gone")
        return None
    now = timezone.now()
    deadline = run.expires_at
    if deadline is not None and now > deadline:
        expired = Run.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(
            status=RunStatus.EXPIRED,
            finished_at=now,
            error=f"expired: could not start by {deadline.isoformat()}",
        )
        if expired:
            log.info("run %s expired: could not start by %s", run_id, deadline.isoformat())
            task_after_run(run.task_id, TaskStatus.FAILED)
        return None
    if run.task.paused and run.trigger not in dispatch.EXPLICIT_TRIGGERS:
        _hold_for_pause(run, now=now)
        return None
    with transaction.atomic():
        if run.task.overlap_policy != OverlapPolicy.ALLOW and not _overlap_allows(run, now=now):
            return None
        late = lateness_ms(now, run.due_at)
        claimed = Run.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(
            status=RunStatus.RUNNING,
            started_at=now,
            heartbeat_at=now,
            worker=worker,
            lateness_ms=late,
        )
    if not claimed:
        log.info("run %s was claimed elsewhere; message ignored", run_id)
        return None
    run.status, run.started_at, run.worker, run.lateness_ms = RunStatus.RUNNING, now, worker, late
    run.heartbeat_at = now
    Task.objects.filter(pk=run.task_id, paused=False).update(
        status=TaskStatus.RUNNING, next_run_at=next_run_at_expr()
    )
    run_log(log, run).info("run started on %s", worker)
    return run


def _hold_for_pause(run: Run, *, now: datetime) -> None:
    """A message for a paused task's run arrived: a schedule fire is skipped (pausing stops
    fires), a delayed run goes back to ``pending`` until the task is resumed."""
    if run.trigger == Trigger.SCHEDULE:
        Run.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(
            status=RunStatus.SKIPPED, finished_at=now, error="skipped: task paused"
        )
    else:
        Run.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(
            status=RunStatus.PENDING, queued_at=None
        )
    log.info("run %s held: task %s is paused", run.id, run.task_id)


def _overlap_allows(run: Run, *, now: datetime) -> bool:
    """The task's overlap policy, decided at the instant the run would start.

    Claims of one task are serialized on its row (``SELECT ... FOR UPDATE``), so two runs
    can never both see "nothing running". ``skip``: a run due while another is running is
    ``skipped``. ``buffer_one``: it waits (back to ``pending``; beat offers it again next
    tick) unless an earlier run is already waiting, in which case it is ``skipped``.
    """
    list(Task.objects.select_for_update().filter(pk=run.task_id).values_list("pk", flat=True))
    others = Run.objects.filter(task_id=run.task_id).exclude(pk=run.pk)
    busy = others.filter(status=RunStatus.RUNNING).values_list("id", flat=True).first()
    if busy is None:
        return True
    waiting = others.filter(
        status__in=[RunStatus.PENDING, RunStatus.QUEUED], due_at__lt=run.due_at
    ).exists()
    if run.task.overlap_policy == OverlapPolicy.BUFFER_ONE and not waiting:
        Run.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(
            status=RunStatus.PENDING, queued_at=None
        )
        log.info("run %s waits for run %s to finish (overlap buffer_one)", run.id, busy)
        return False
    Run.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(
        status=RunStatus.SKIPPED,
        finished_at=now,
        error=f"skipped: run {busy} was still running (overlap {run.task.overlap_policy})",
    )
    log.info("run %s skipped: run %s still running", run.id, busy)
    return False


def run_complete(*, run: Run, output: str = "", result: Any = None) -> Run:
    """``running → completed``; a no-op if the run's end was already recorded (for instance
    the sweep declared it lost while its worker was cut off from the database)."""
    text, truncated = cap_output(output)
    fields = {"output": text, "truncated": truncated, "result": jsonable(result)}
    if connection.vendor == "postgresql":
        finished = _complete_fast(run, now=timezone.now(), **fields)
    else:
        with transaction.atomic():
            finished = run_finish(run, RunStatus.COMPLETED, **fields)
            if finished:
                _task_after_success(run.task_id)
    if finished:
        run_log(log, run).info("run completed")
    return run


def _task_after_success(task_id: str) -> None:
    """:func:`task_after_run` with ``completed`` and the failure streak reset, in one update.

    The streak is reset on a paused task too; its status and ``next_run_at`` are not touched.
    """
    Task.objects.filter(pk=task_id).update(
        status=Case(
            When(paused=True, then=F("status")), default=_status_after(TaskStatus.COMPLETED)
        ),
        next_run_at=Case(When(paused=True, then=F("next_run_at")), default=next_run_at_expr()),
        consecutive_failures=0,
    )


def run_fail(*, run: Run, error: str, retryable: bool = True) -> Run:
    """Record a failure; schedule the next attempt while retries remain.

    Attempt ``n`` is retried while ``n <= max_retries`` (so ``max_retries=3`` makes up to 4
    attempts); each retry is a new run row (``trigger=retry``, ``attempt=n+1``, linked to
    the first attempt) due after :func:`retry_delay`. The finish is conditional on the run
    still being ``running``, and the next attempt is created in the same transaction only
    if it was, so two processes failing the same run make one retry, not two.
    """
    task = run.task
    retry = retryable and run.attempt <= task.max_retries
    status = RunStatus.RETRYING if retry else RunStatus.FAILED
    text, _ = cap_output(error)
    with transaction.atomic():
        if not run_finish(run, status, error=text):
            return run
        if retry:
            now = timezone.now()
            run_create(
                task=task,
                trigger=Trigger.RETRY,
                due_at=now + retry_delay(task, attempt=run.attempt),
                now=now,
                scheduled_for=run.scheduled_for,
                attempt=run.attempt + 1,
                first_attempt_id=run.first_attempt_id or run.id,
                expires_at=run.expires_at,
            )
        else:
            task_after_run(run.task_id, TaskStatus.FAILED)
            _count_failure(task, error=text)
    run_log(log, run).warning("run %s: %s", status, text.splitlines()[0] if text else "")
    return run


def _count_failure(task: Task, *, error: str) -> None:
    """One more failure in a row; pause the task once ``pause_after_failures`` is reached."""
    Task.objects.filter(pk=task.pk).update(consecutive_failures=F("consecutive_failures") + 1)
    if not task.pause_after_failures:
        return
    current = Task.objects.filter(pk=task.pk, paused=False).first()
    if current is None or current.consecutive_failures < task.pause_after_failures:
        return
    from .tasks import task_pause  # tasks imports this module

    reason = error.splitlines()[0] if error else "failed"
    task_pause(
        task=current,
        note=f"auto-paused after {current.consecutive_failures} consecutive failures; last: {reason}"[
            :1000
        ],
        by="system",
    )
    log.error(
        "task %s auto-paused after %d consecutive failures",
        task.pk,
        current.consecutive_failures,
        extra={"task_id": task.pk},
    )


def retry_delay(task: Task, *, attempt: int) -> timedelta:
    """Exponential backoff from ``retry_backoff_seconds``, capped, with full jitter on half."""
    base = task.retry_backoff_seconds * (2 ** (attempt - 1))
    capped = min(base, MAX_RETRY_DELAY_SECONDS)
    return timedelta(seconds=capped / 2 + random.uniform(0, capped / 2))  # noqa: S311


def cap_output(text: str) -> tuple[str, bool]:
    """At most ``TASKS_OUTPUT_LIMIT_BYTES`` of UTF-8, and whether anything was cut."""
    limit = settings.TASKS_OUTPUT_LIMIT_BYTES
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text, False
    return data[:limit].decode("utf-8", errors="ignore"), True


def new_run(
    task: Task,
    *,
    trigger: str,
    due_at: datetime,
    scheduled_for: datetime | None = None,
    attempt: int = 1,
    first_attempt_id: Any = None,
    expires_at: datetime | None = None,
) -> Run:
    if expires_at is None and task.expires_after_seconds:
        expires_at = due_at + timedelta(seconds=task.expires_after_seconds)
    return Run(
        task=task,
        trigger=trigger,
        status=RunStatus.PENDING,
        due_at=due_at,
        scheduled_for=scheduled_for or due_at,
        attempt=attempt,
        first_attempt_id=first_attempt_id,
        expires_at=expires_at,
    )


def run_create(*, task: Task, trigger: str, due_at: datetime, now: datetime, **extra: Any) -> Run:
    """Store a ``pending`` run, move its task to ``pending`` (unless it is running or paused)
    with the run in its ``next_run_at``, and publish it at commit if it is due within the
    horizon. On Postgres that is one statement (:func:`_create_fast`)."""
    run = new_run(task, trigger=trigger, due_at=due_at, **extra)
    if connection.vendor == "postgresql":
        _create_fast(run)
    else:
        with transaction.atomic():
            run.save(force_insert=True)
            Task.objects.filter(pk=task.pk, paused=False).exclude(status=TaskStatus.RUNNING).update(
                status=TaskStatus.PENDING
            )
            Task.objects.filter(pk=task.pk).update(next_run_at=next_run_at_expr())
    dispatch.enqueue_on_commit(run, now=now)
    return run


def run_finish(run: Run, status: str, **fields: Any) -> bool:
    """``running → status``; ``False`` (and ``run`` reloaded) if it was no longer running."""
    now = timezone.now()
    changed = Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
        status=status, finished_at=now, **fields
    )
    if not changed:
        log.warning("run %s was no longer running; its %s outcome is not recorded", run.pk, status)
        run.refresh_from_db()
        return False
    run.status, run.finished_at = status, now
    for name, value in fields.items():
        setattr(run, name, value)
    return True


# --- recovery: the writes of beat's sweep (tasks_app.recovery) and the worker's lease -----


def run_renew_leases(*, run_ids: Iterable[Any], now: datetime) -> int:
    """Push the lease (``heartbeat_at``) of these runs, while they are still running."""
    ids = list(run_ids)
    if not ids:
        return 0
    return Run.objects.filter(id__in=ids, status=RunStatus.RUNNING).update(heartbeat_at=now)


def run_expire_overdue(*, now: datetime, batch: int = 1000) -> int:
    """``pending``/``queued`` runs past their deadline (``expires_at``) become ``expired``.

    This is what expires a run when no worker is up to notice at claim time; rows are taken
    with ``SKIP LOCKED`` so a run being published or claimed right now is left alone (the
    claim checks the deadline itself).
    """
    total = 0
    waiting = [RunStatus.PENDING, RunStatus.QUEUED]
    while True:
        with transaction.atomic():
            rows = list(
                Run.objects.select_for_update(skip_locked=True)
                .filter(status__in=waiting, expires_at__lt=now)
                .values_list("id", "task_id")[:batch]
            )
            if not rows:
                return total
            Run.objects.filter(id__in=[r[0] for r in rows], status__in=waiting).update(
                status=RunStatus.EXPIRED,
                finished_at=now,
                error=Concat(
                    Value("expired: could not start by "),
                    Cast("expires_at", output_field=CharField()),
                    output_field=CharField(),
                ),
            )
            for task_id in {r[1] for r in rows}:
                task_after_run(task_id, TaskStatus.FAILED)
        total += len(rows)
        if len(rows) < batch:
            return total


def run_fail_stalled(*, now: datetime, batch: int = 500) -> list[Run]:
    """Running runs whose worker is gone, retried or failed by their task's policy.

    A run is stalled when its lease (``heartbeat_at``, renewed every
    ``TASKS_HEARTBEAT_SECONDS`` by the executing process) is older than
    ``TASKS_STALL_SECONDS``: its worker was killed, lost its database, or hangs without
    the GIL. A run still renewing its lease but running longer than its hard time limit
    plus the stall window is failed too (a pool that cannot enforce time limits).
    """
    stall = timedelta(seconds=settings.TASKS_STALL_SECONDS)
    grace = timedelta(seconds=dispatch.HARD_LIMIT_GRACE_SECONDS)
    candidates = (
        Run.objects.select_related("task")
        .filter(status=RunStatus.RUNNING, started_at__lt=now - stall)
        .order_by("started_at")[:batch]
    )
    failed: list[Run] = []
    for run in candidates:
        assert run.started_at is not None
        lease = run.heartbeat_at or run.started_at
        limit = timedelta(seconds=run_timeout_seconds(run.task))
        elapsed = now - run.started_at
        worker = run.worker or "its worker"
        if now - lease > stall:
            silent = int((now - lease).total_seconds())
            error = (
                timed_out_error(run.task, f"{worker} lost; no lease renewal for {silent} s")
                if elapsed > limit
                else f"worker lost: {worker} stopped renewing the run's lease {silent} s ago"
            )
        elif elapsed > limit + grace + stall:
            error = timed_out_error(
                run.task, f"still running after {int(elapsed.total_seconds())} s"
            )
        else:
            continue
        log.warning("run %s stalled: %s", run.id, error)
        failed.append(run_fail(run=run, error=error, retryable=True))
    return failed


def run_requeue_lost(*, now: datetime, queues: Iterable[str]) -> int:
    """Runs ``queued`` longer than ``TASKS_REQUEUE_AFTER_SECONDS`` past their due time, in
    ``queues`` (those the caller found holding no ready message), go back to ``pending`` so
    the next release publishes them again under the same run id. Should the original
    message turn up after all, the claim lets only one of the two start the run.
    """
    cutoff = now - timedelta(seconds=settings.TASKS_REQUEUE_AFTER_SECONDS)
    return Run.objects.filter(
        status=RunStatus.QUEUED,
        queued_at__lt=cutoff,
        due_at__lt=cutoff,
        task__queue__in=list(queues),
    ).update(status=RunStatus.PENDING, queued_at=None)


def _persist(write: Callable[[], Run]) -> Run:
    """Run ``write`` (a conditional, idempotent outcome write), retrying for up to
    ``TASKS_DB_RETRY_SECONDS`` while the database is unreachable, so a database restart
    during a run delays its record instead of leaving it ``running``."""
    deadline = time.monotonic() + settings.TASKS_DB_RETRY_SECONDS
    while True:
        try:
            return write()
        except DB_ERRORS:
            if time.monotonic() > deadline:
                raise
            log.warning("database unavailable; retrying the run's outcome", exc_info=True)
            connection.close()
            time.sleep(0.5)


def task_after_run(task_id: str, status: str) -> None:
    """Keep the task's status in step with its latest run; recurring tasks go back to
    ``pending`` while they will fire again (a finished schedule — ``max_runs`` reached,
    ``end_at`` passed — ends with its last run's status)."""
    Task.objects.filter(pk=task_id, paused=False).update(
        status=_status_after(status), next_run_at=next_run_at_expr()
    )


def _status_after(status: str) -> Case:
    """The task's status once a run ended ``status``: a recurring task that will fire again
    is back to ``pending`` (the Postgres fast path spells the same rule in SQL)."""
    return Case(
        When(
            schedule_type__in=RECURRING, next_run_at__isnull=False, then=Value(TaskStatus.PENDING)
        ),
        default=Value(status),
    )


# --- Postgres fast path of the execution lifecycle ------------------------------------------
# The same conditional transitions as the ORM code above, each as one statement (autocommit,
# so atomic): a no-op run costs two round trips instead of ten queries. Values are computed
# by Postgres from the same inputs the ORM path uses (``now`` is passed in).

_RUN_FIELDS = Run._meta.concrete_fields
_TASK_FIELDS = Task._meta.concrete_fields
_RECURRING_SQL = ", ".join(f"'{kind}'" for kind in RECURRING)


def _columns(alias: str, fields: Any) -> str:
    return ", ".join(f'{alias}."{f.column}" AS "{alias}_{f.column}"' for f in fields)


def _from_db(model: Any, fields: Any, values: Any) -> Any:
    converted = []
    for field, value in zip(fields, values, strict=True):
        for convert in field.get_db_converters(connection):
            value = convert(value, field, connection)
        converted.append(value)
    return model.from_db(connection.alias, [f.attname for f in fields], converted)


_CLAIM_SQL = f"""
WITH claimed AS (
    UPDATE tasks_app_run AS r
       SET status = 'running', started_at = %(now)s, heartbeat_at = %(now)s, worker = %(worker)s,
           lateness_ms = round(extract(epoch FROM %(now)s - r.due_at) * 1000, 3)::float8
      FROM tasks_app_task AS t
     WHERE r.id = %(run_id)s AND r.status = 'queued' AND t.id = r.task_id
       AND NOT t.paused AND t.overlap_policy = '{OverlapPolicy.ALLOW}'
       AND (r.expires_at IS NULL OR r.expires_at >= %(now)s)
 RETURNING {_columns("r", _RUN_FIELDS)}, {_columns("t", _TASK_FIELDS)},
           CASE WHEN t.schedule_type IN ({_RECURRING_SQL}) THEN NULL
                ELSE (SELECT min(w.due_at) FROM tasks_app_run AS w
                       WHERE w.task_id = r.task_id AND w.status IN ('pending', 'queued')
                         AND w.id <> r.id) END AS waiting_due_at
), task_running AS (
    UPDATE tasks_app_task AS t
       SET status = 'running',
           next_run_at = CASE WHEN t.schedule_type IN ({_RECURRING_SQL}) THEN t.next_run_at
                              ELSE c.waiting_due_at END
      FROM claimed AS c
     WHERE t.id = c.r_task_id AND NOT t.paused
       AND (t.status <> 'running' OR (t.schedule_type NOT IN ({_RECURRING_SQL})
                                      AND t.next_run_at IS DISTINCT FROM c.waiting_due_at))
)
SELECT * FROM claimed
"""  # noqa: S608 (only column names and constants are interpolated)


def _fetch_one(sql: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
    """Execute one of the statements below server-side bound (psycopg 3), prepared once per
    connection when ``DATABASE_PREPARED_STATEMENTS`` is on (psycopg ignores ``prepare=True``
    while the connection's ``prepare_threshold`` is ``None``, Django's default): Postgres
    then plans it once per connection, not once per run. Errors are Django's
    (``OperationalError`` when the database is away), as for the ORM."""
    if not is_psycopg3:
        with connection.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchone()  # type: ignore[no-any-return]
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cur:
        cur.execute(sql, params, prepare=True)
        return cur.fetchone()


def _claim_fast(run_id: str, *, worker: str, now: datetime) -> Run | None:
    """Claim a queued run of an unpaused ``allow`` task within its deadline, and mark the
    task ``running``, in one statement. ``None`` if that claimed nothing (the general path
    then decides why).

    The task's ``next_run_at`` is computed as :func:`next_run_at_expr` does; the statement
    sees the rows as they were before it, hence ``w.id <> r.id`` (this run is no longer
    waiting). The task is written only if something changes.
    """
    try:
        key = uuid.UUID(str(run_id))
    except ValueError:  # not a run id: the general path says so
        return None
    row = _fetch_one(_CLAIM_SQL, {"run_id": key, "worker": worker, "now": now})
    if row is None:
        return None
    n = len(_RUN_FIELDS)
    run: Run = _from_db(Run, _RUN_FIELDS, row[:n])
    run.task = _from_db(Task, _TASK_FIELDS, row[n : n + len(_TASK_FIELDS)])
    return run


_CREATE_SQL = f"""
WITH created AS (
    INSERT INTO tasks_app_run ({", ".join(f'"{f.column}"' for f in _RUN_FIELDS)})
    VALUES ({", ".join(f"%({f.column})s" for f in _RUN_FIELDS)})
    RETURNING task_id, due_at
)
UPDATE tasks_app_task AS t
   SET status = CASE WHEN NOT t.paused AND t.status <> 'running' THEN 'pending'
                     ELSE t.status END,
       next_run_at = CASE WHEN t.schedule_type IN ({_RECURRING_SQL}) THEN t.next_run_at
                          ELSE LEAST(c.due_at, (SELECT min(w.due_at) FROM tasks_app_run AS w
                                                 WHERE w.task_id = t.id
                                                   AND w.status IN ('pending', 'queued'))) END
  FROM created AS c
 WHERE t.id = c.task_id
RETURNING t.id
"""  # noqa: S608 (only column names and constants are interpolated)


def _create_fast(run: Run) -> None:
    """Insert ``run`` and update its task as the ORM path of :func:`run_create` does, in one
    statement. The statement does not see its own new row, hence ``LEAST`` with its due
    time for the task's earliest waiting run."""
    params = {
        f.column: f.get_db_prep_save(f.pre_save(run, add=True), connection) for f in _RUN_FIELDS
    }
    _fetch_one(_CREATE_SQL, params)
    run._state.adding, run._state.db = False, connection.alias


_COMPLETE_SQL = f"""
WITH finished AS (
    UPDATE tasks_app_run
       SET status = 'completed', finished_at = %(now)s, output = %(output)s,
           truncated = %(truncated)s, result = %(result)s
     WHERE id = %(run_id)s AND status = 'running'
 RETURNING task_id
), task_done AS (
    UPDATE tasks_app_task AS t
       SET status = CASE WHEN t.paused THEN t.status
                         WHEN t.schedule_type IN ({_RECURRING_SQL}) AND t.next_run_at IS NOT NULL THEN 'pending'
                         ELSE 'completed' END,
           next_run_at = CASE WHEN t.paused OR t.schedule_type IN ({_RECURRING_SQL})
                              THEN t.next_run_at
                              ELSE (SELECT min(w.due_at) FROM tasks_app_run AS w
                                     WHERE w.task_id = t.id
                                       AND w.status IN ('pending', 'queued')) END,
           consecutive_failures = 0
      FROM finished AS f
     WHERE t.id = f.task_id
)
SELECT count(*) FROM finished
"""  # noqa: S608 (only constants are interpolated)


def _complete_fast(run: Run, *, now: datetime, output: str, truncated: bool, result: Any) -> bool:
    """:func:`run_finish` ``completed`` plus :func:`_task_after_success`, as one statement."""
    params = {
        "run_id": run.pk,
        "now": now,
        "output": output,
        "truncated": truncated,
        "result": Run._meta.get_field("result").get_db_prep_save(result, connection),
    }
    row = _fetch_one(_COMPLETE_SQL, params)
    if not row or not row[0]:
        log.warning(
            "run %s was no longer running; its %s outcome is not recorded",
            run.pk,
            RunStatus.COMPLETED,
        )
        run.refresh_from_db()
        return False
    run.status, run.finished_at = RunStatus.COMPLETED, now
    run.output, run.truncated, run.result = output, truncated, result
    return True


def _last_attempt(run: Run) -> int:
    first = run.first_attempt_id or run.id
    latest = (
        Run.objects.filter(Q(pk=first) | Q(first_attempt_id=first))
        .order_by("-attempt")
        .values_list("attempt", flat=True)
        .first()
    )
    return latest or run.attempt
