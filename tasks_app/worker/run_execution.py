"""A run in the worker that executes it: the claim (due, not paused, its overlap and flow
allowing it), the action's execution and the outcome recorded. Only a worker calls these;
what another way in does to a run too (fail, lose, interrupt, cancel, expire) stays in
``tasks_app.services.run_lifecycle``.

Every status change is a conditional statement (``UPDATE ... WHERE status = <expected>``,
named in ``tasks_app/store/queries.sql``): whoever gets there first wins and the others
change nothing, so a redelivered message changes nothing. See docs/reliability.md.
"""

from __future__ import annotations

import logging
import time
import traceback
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.db import connection, transaction

from .. import actions, store
from ..conf import app_settings
from ..models import Run, RunStatus, Trigger
from ..runtime import clock
from ..runtime.run_logs import run_log
from ..services import flow
from ..services.audit import jsonable
from ..services.run_lifecycle import (
    DB_ERRORS,
    _cancelled,
    _not_recorded,
    _recover_if_orphaned,
    cap_output,
    run_fail,
    runs_expire,
)
from ..services.time_limits import timed_out_error
from ..vocabulary import secret_fields

log = logging.getLogger(__name__)


# The longest a worker waits, holding its slot, for a run whose message came before its due
# instant (by the database's clock) before handing it back to beat.
EARLY_WAIT_SECONDS = 5.0


# The reasons claim_run gives when the task's flow control holds a run back (services.flow).
FLOW_REFUSALS = ("concurrency", "line", "rate")


# The error of a run asked to stop whose action then returned (its output and result kept).
RETURNED_AFTER_CANCEL = "cancelled: its action returned after the request to stop"


def run_execute(
    *, run_id: str, worker: str, before_outcome: Callable[[], None] | None = None
) -> Run | None:
    """Claim the run, call its action, record the outcome. ``None`` if not claimable.

    A redelivered or duplicated message for a run that already started, finished or was
    cancelled does nothing (the claim is conditional on ``queued``). The outcome is written
    with :func:`_persist`, which waits out a short database outage instead of losing it.
    While this runs, the caller renews the run's lease (``tasks_app.worker.recovery``), and
    ``before_outcome`` is called right before the outcome is written.
    """
    outcome = _execute(run_id=run_id, worker=worker)
    if outcome is None:
        return None
    if before_outcome is not None:
        before_outcome()
    run = _persist(outcome)
    if run.flow_waiting and flow.limited(run.task):  # its slot is free: a held run may go
        try:
            flow.flow_admit([run.task_id])
        except DB_ERRORS:  # beat's next release pass lets them go
            log.warning("letting held runs of task %s go failed", run.task_id, exc_info=True)
    return run


def _execute(*, run_id: str, worker: str) -> Callable[[], Run] | None:
    """Claim and call the action: the write of its outcome, or ``None`` if not claimed."""
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
        created_at=run.created_at,
        started_at=run.started_at,
        worker=run.worker,
    )
    try:
        action = actions.get(task.action)
    except KeyError:
        # Saved after this worker started (the web knew it, this process does not): a
        # retry may land on a worker that was restarted since.
        error = unregistered_action_error(task.action)
        return lambda: run_fail(run=run, error=error, retryable=True, executor=True)
    payload = run.call_payload
    # Its secrets by the action it was made with and the one it runs (they differ when its
    # task's action changed since): never in what it produced (secret_fields.scrub).
    forms = secret_fields.scrubber(
        secret_fields.secret_values(run.made_with, payload)
        | secret_fields.secret_values(task.action, payload)
    )
    try:
        outcome = action.func(dict(payload), ctx)
    except SoftTimeLimitExceeded:
        error = timed_out_error(task)
        return lambda: run_fail(run=run, error=error, retryable=True, executor=True)
    except Exception as exc:  # the action's failure is the run's failure, never the worker's
        retryable = not isinstance(exc, actions.ActionError) or exc.retryable
        shown = exc.exception if isinstance(exc, actions.Raised) else exc
        error = f"{type(shown).__name__}: {shown}\n\n{''.join(traceback.format_exception(shown))}"
        error = secret_fields.scrub(error, forms)
        return lambda: run_fail(run=run, error=error, retryable=retryable, executor=True)
    if isinstance(outcome, actions.Outcome):
        output, result = outcome.output, outcome.result
    else:
        output, result = ("" if outcome is None else str(outcome)), None
    if forms:
        output = secret_fields.scrub(output, forms)
        result = secret_fields.scrub(jsonable(result), forms)
    return lambda: run_complete(run=run, output=output, result=result)


def unregistered_action_error(name: str) -> str:
    """A run's error when its task names an action this worker does not know."""
    return (
        f"action {name!r} is not registered in this worker: restart the workers after "
        "deploying the code that registers it"
    )


def run_claim(*, run_id: str, worker: str) -> Run | None:
    """``queued → running``, or the move that fits a run that may not start.

    One statement, ``claim_run``, claims the run or says why it may not (its ``refused``
    reason, decided there beside the claim's own conditions); :func:`_claim_refused` acts on
    that reason: a duplicate message does nothing, a run past its deadline is ``expired``,
    a paused task's run is held or skipped, a paused queue's run is held (back to
    ``pending``), a ``running`` run's executor is checked, and
    another overlap policy is checked under the task's lock before the same statement
    claims it.
    """
    now = clock.now()
    try:
        key = uuid.UUID(str(run_id))
    except ValueError:
        log.warning("message for %r, which is not a run id, ignored", run_id)
        return None
    run, refused = _claim(key, worker=worker, now=now)
    if refused == "early" and run is not None:
        run, refused, now = _claim_when_due(run, worker=worker, now=now)
    if refused is not None:
        run = _claim_refused(key, run, refused, worker=worker, now=now)
    if run is not None and log.isEnabledFor(logging.INFO):
        run_log(log, run).info("run started on %s", worker)
    return run


def _claim(
    run_id: uuid.UUID, *, worker: str, now: datetime, overlap_checked: bool = False
) -> tuple[Run | None, str | None]:
    """The run claimed and ``None``, or the run as the statement saw it (``None`` if gone)
    and the reason it was not claimed."""
    claim = store.claim_run(run_id=run_id, worker=worker, now=now, overlap_checked=overlap_checked)
    return claim.run, claim.refused


def _claim_when_due(
    run: Run, *, worker: str, now: datetime
) -> tuple[Run | None, str | None, datetime]:
    """A message for a run that is not due yet by the database's clock: a broker's delay or
    an ETA can end a few milliseconds before the instant (each process reads the clock to
    within half a round trip). Wait that out, up to ``EARLY_WAIT_SECONDS``, and claim again;
    a run due later is refused as ``early`` again."""
    wait = (run.starts_at - now).total_seconds()
    if wait > EARLY_WAIT_SECONDS:
        return run, "early", now
    time.sleep(max(wait, 0.0))
    now = clock.now()
    claimed, refused = _claim(run.pk, worker=worker, now=now)
    return claimed, refused, now


def _claim_refused(
    run_id: uuid.UUID, run: Run | None, refused: str, *, worker: str, now: datetime
) -> Run | None:
    """Act on the reason ``claim_run`` gave for not claiming ``run``."""
    if run is None or refused == "not_queued":
        log.info("run %s is %s; message ignored", run_id, run.status if run else "gone")
    elif refused == "running":
        _recover_if_orphaned(run)
    elif refused == "expired":
        if runs_expire([run.pk], now=now) and run.expires_at is not None:
            log.info("run %s expired: could not start by %s", run_id, run.expires_at.isoformat())
    elif refused == "early":
        # Not due for a while (the message left too early, or the database's clock moved
        # back): back to pending, and beat publishes it again as its instant comes.
        store.unqueue_runs(run_ids=[run.pk])
        log.warning("run %s arrived %s before it is due; handed back", run_id, run.due_at - now)
    elif refused == "paused":
        _hold_for_pause(run, now=now)
    elif refused == "queue_paused":
        _hold_for_queue_pause(run)
    elif refused == "overlap":
        with transaction.atomic():
            # Locks in the order of every claim and of task_pause: the run's row, then the
            # task's.
            list(Run.objects.select_for_update().filter(pk=run.pk).values_list("pk", flat=True))
            if not _overlap_allows(run, now=now):
                return None
            # The start is read after the task's lock was granted: the run that held it may
            # have finished meanwhile, and this run must not appear to have started before.
            claimed, again = _claim(run.pk, worker=worker, now=clock.now(), overlap_checked=True)
            if again is None:
                return claimed
            if again == "queue_paused" and claimed is not None:
                _hold_for_queue_pause(claimed)
            elif again.startswith(FLOW_REFUSALS):
                flow.flow_hold(run, again)
            else:
                log.info("run %s not claimed after its overlap check (%s)", run_id, again)
    elif refused.startswith(FLOW_REFUSALS):
        flow.flow_hold(run, refused)
    else:
        raise ValueError(f"claim_run refused run {run_id} for an unknown reason: {refused!r}")
    return None


def _hold_for_pause(run: Run, *, now: datetime) -> None:
    """A message for a paused task's run arrived: a schedule fire is skipped (pausing stops
    fires), a delayed run goes back to ``pending`` until the task is resumed."""
    if run.trigger == Trigger.SCHEDULE:
        store.skip_run(run_id=run.pk, now=now, error="skipped: task paused")
    else:
        store.unqueue_runs(run_ids=[run.pk])
    log.info("run %s held: task %s is paused", run.id, run.task_id)


def _hold_for_queue_pause(run: Run) -> None:
    """A message for a run of a paused queue arrived: the run goes back to ``pending``
    (whatever its trigger: nothing is skipped), its due instant kept, and the worker's slot
    is free at once; the release publishes it again once the queue is resumed."""
    store.unqueue_runs(run_ids=[run.pk])
    log.info("run %s held: its queue is paused", run.id)


def _overlap_allows(run: Run, *, now: datetime) -> bool:
    """Act on the task's overlap policy, decided by the store at the instant the run would
    start (``overlap_verdict``, under the task's lock): ``skip`` a run due while another is
    running, or let a ``buffer_one`` run ``wait`` (back to ``pending``; beat offers it again
    next tick) unless an earlier run is already waiting."""
    overlap = store.overlap_verdict(run_id=run.pk, task_id=run.task_id, due_at=run.due_at)
    if overlap.verdict == "start":
        return True
    if overlap.verdict == "wait":
        store.unqueue_runs(run_ids=[run.pk])
        log.info("run %s waits for run %s to finish (overlap buffer_one)", run.id, overlap.busy)
        return False
    reason = f"skipped: run {overlap.busy} was still running (overlap {run.task.overlap_policy})"
    store.skip_run(run_id=run.pk, now=now, error=reason)
    log.info("run %s skipped: run %s still running", run.id, overlap.busy)
    return False


def run_complete(*, run: Run, output: str = "", result: Any = None) -> Run:
    """``running → completed`` (one statement, ``complete_run``), or ``cancelled`` with the
    same output if a person asked the run to stop before (:func:`run_cancel`); a no-op if
    the run's end was already recorded (for instance the sweep declared it lost while its
    worker was cut off from the database)."""
    text, truncated = cap_output(output)
    now = clock.now()
    value = None if result is None else jsonable(result)
    done = store.complete_run(
        run_id=run.pk,
        now=now,
        output=text,
        truncated=truncated,
        result=value,
        cancelled_error=RETURNED_AFTER_CANCEL,
    )
    if not done.status:
        _not_recorded(run, RunStatus.COMPLETED)
        return run
    run.status, run.finished_at, run.flow_waiting = RunStatus(done.status), now, done.runs_held
    run.output, run.truncated, run.result = text, truncated, value
    if run.status == RunStatus.CANCELLED:
        run.error = RETURNED_AFTER_CANCEL
        _cancelled(run, how=RETURNED_AFTER_CANCEL)
    elif log.isEnabledFor(logging.INFO):
        run_log(log, run).info("run completed")
    return run


def _persist(write: Callable[[], Run]) -> Run:
    """Run ``write`` (a conditional, idempotent outcome write), retrying for up to
    ``TASKS_DB_RETRY_SECONDS`` while the database is unreachable, so a database restart
    during a run delays its record instead of leaving it ``running``."""
    deadline = time.monotonic() + app_settings.DB_RETRY_SECONDS
    while True:
        try:
            return write()
        except DB_ERRORS:
            if time.monotonic() > deadline:
                raise
            log.warning("database unavailable; retrying the run's outcome", exc_info=True)
            connection.close()
            time.sleep(0.5)
