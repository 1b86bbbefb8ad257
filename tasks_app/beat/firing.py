"""Recurring fires, recorded by beat: the runs of every task whose next fire is due (or, with
fire-ahead, due within the horizon), in batches, each task's next fire advanced in the same
statement; a task whose schedule cannot be computed is put in alarm, not the batch."""

from __future__ import annotations

import logging
import time
from collections import Counter
from datetime import datetime, timedelta

from django.db import InterfaceError, OperationalError, transaction
from django.db.models import F
from django_celery_beat.models import PeriodicTask

from .. import store
from ..models import RECURRING, Run, RunStatus, Task, Trigger
from ..selectors import paused_filter
from ..services.alarms import schedule_error_raise
from ..services.run_create import new_run, runs_insert
from ..services.run_release import horizon, send_queued
from ..timing.task_schedule import fire_due_at, plan_task_fires
from ..vocabulary.choices import REQUESTED_BY_BEAT, REQUESTED_BY_SCHEDULE

log = logging.getLogger(__name__)


FIRE_BATCH = 1000  # tasks locked and written per transaction


MAX_PASSES = 1000  # bound on batches per call (1,000,000 fires)


def schedule_fire_due(
    *,
    now: datetime,
    lookahead: timedelta,
    batch: int = FIRE_BATCH,
    deadline: float | None = None,
) -> list[Run]:
    """Record a run for every recurring fire due by ``now + lookahead``; advance each task.

    Per batch, in one transaction: lock due tasks (``SKIP LOCKED``: a second beat takes other
    rows, never the same), plan each, insert the runs (``ON CONFLICT DO NOTHING`` against
    ``UNIQUE (task, scheduled_for)``: a replayed tick records nothing twice), and write each
    task's ``next_run_at`` and ``fire_count``. Runs due within the release horizon are
    inserted as ``queued`` and published right after commit; a failed publish returns them
    to ``pending`` so the release pass sends them again. A crash before commit loses
    nothing (the tasks still point at the fires); after commit it fires nothing twice.
    Returns the runs recorded.

    ``deadline`` (``time.monotonic()``): stop after the batch that passes it, the rest for
    a later call (beat preparing a busy instant ahead, ``TASKS_FIRE_AHEAD_SECONDS``, leaves
    room for its releases). Tasks are taken earliest fire first, so what is left is later.
    """
    until = now + lookahead
    recorded: list[Run] = []
    for _ in range(MAX_PASSES):
        runs, again = _fire_batch(now=now, until=until, batch=batch)
        recorded.extend(runs)
        if not again or (deadline is not None and time.monotonic() >= deadline):
            break
    return recorded


def _fire_batch(*, now: datetime, until: datetime, batch: int) -> tuple[list[Run], bool]:
    with transaction.atomic():
        # Only ids here: a row whose columns cannot even be read (an instant out of Python's
        # range) is then isolated below like any other bad row.
        ids = list(
            Task.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(
                schedule_type__in=RECURRING,
                state__schedule_error="",
                state__next_run_at__lte=until,
            )
            .filter(paused_filter(paused=False))
            .order_by("state__next_run_at")
            .values_list("id", flat=True)[:batch]
        )
        if not ids:
            return [], False
        inserted, still_due = _fire_isolating(ids, now=now, until=until)
    return inserted, len(ids) == batch or still_due


def _fire_isolating(ids: list[str], *, now: datetime, until: datetime) -> tuple[list[Run], bool]:
    """Fire the tasks ``ids`` (already locked) in one savepoint — the fast path. If that
    raises, fire each half in its own savepoint, down to the single task that raises, which
    is flagged (``alarms.schedule_error_raise``) and skipped until edited: one bad row costs
    about log2(batch) extra savepoints, never the other tasks' fires. A lost database
    connection is not a bad row: it propagates and the whole tick is retried."""
    try:
        with transaction.atomic():
            inserted, still_due, culprits = _fire_tasks(ids, now=now, until=until)
    except (OperationalError, InterfaceError):
        raise
    except Exception as exc:
        if len(ids) == 1:
            schedule_error_raise(ids[0], error=exc, now=now)
            return [], False
        log.warning("a firing batch of %d tasks failed (%r); isolating the culprit", len(ids), exc)
        half = len(ids) // 2
        left, left_due = _fire_isolating(ids[:half], now=now, until=until)
        right, right_due = _fire_isolating(ids[half:], now=now, until=until)
        return left + right, left_due or right_due
    for task_id, error in culprits:  # flagged once the savepoint holding their batch stands
        schedule_error_raise(task_id, error=error, now=now)
    return inserted, still_due


def _fire_tasks(
    ids: list[str], *, now: datetime, until: datetime
) -> tuple[list[Run], bool, list[tuple[str, Exception]]]:
    """Plan, record and advance the tasks ``ids``; returns the runs recorded, whether some
    task is still due by ``until`` and the tasks whose own schedule math raised (Python
    side: they are left out, the others go on). A failing statement raises."""
    release_by = now + horizon()
    runs: list[Run] = []
    advances: list[tuple[str, datetime | None]] = []
    fired_tasks: list[Task] = []
    still_due = False
    culprits: list[tuple[str, Exception]] = []
    for task in Task.objects.filter(id__in=ids).select_related("state"):
        # The rows are read again now that their tasks are locked: a pause committed since
        # the batch was chosen (it lives in the state row, which the lock does not cover) is
        # seen here, and a pause still to come waits for this batch (task_pause locks the task).
        if task.paused:
            continue
        requested_by = (
            f"{REQUESTED_BY_SCHEDULE}{task.declared_in}" if task.declared_in else REQUESTED_BY_BEAT
        )
        try:
            plan = plan_task_fires(task, now=now, lookahead=until - now)
            task_runs = [
                new_run(
                    task,
                    trigger=Trigger.SCHEDULE,
                    due_at=fire_due_at(task, fire),
                    scheduled_for=fire,
                    requested_by=requested_by,
                )
                for fire in plan.fires
            ]
        except Exception as exc:  # OverflowError, a corrupt cron or time zone, ...
            culprits.append((task.id, exc))
            continue
        if plan.missed:
            log.warning(
                "task %s missed %d fire(s) before %s; not replayed (catch-up: %s)",
                task.id,
                plan.missed,
                now.isoformat(),
                task.catchup,
            )
        for run in task_runs:
            run.created_at = now  # recorded at the tick, and (when due soon) queued then too
        runs.extend(task_runs)
        fired_tasks.append(task)
        advances.append((task.id, plan.next_fire))
        still_due = still_due or (plan.next_fire is not None and plan.next_fire <= until)
    inserted = _insert_runs(runs, release_by=release_by)
    fired = Counter(run.task_id for run in inserted)
    _advance_tasks([(task_id, nxt, fired[task_id]) for task_id, nxt in advances])
    periodic = [t.periodic_task_id for t in fired_tasks if t.periodic_task_id and fired[t.id]]
    if periodic:
        # Keeps django-celery-beat's admin columns truthful. ``update()`` sends no signal,
        # so the global "changed" row is not touched.
        PeriodicTask.objects.filter(id__in=periodic).update(
            last_run_at=now, total_run_count=F("total_run_count") + 1
        )
    to_send = [r for r in inserted if r.status == RunStatus.QUEUED]
    if to_send:
        transaction.on_commit(lambda: send_queued(to_send, now=now))
    return inserted, still_due, culprits


def _insert_runs(runs: list[Run], *, release_by: datetime) -> list[Run]:
    """Insert ``runs``, skipping fires already recorded; return those actually inserted,
    queued when due by ``release_by`` and releasable (a fire on a paused queue waits,
    pending, for the queue's resume)."""
    inserted = runs_insert(runs, release_by=release_by)
    if len(inserted) < len(runs):
        log.info("%d fire(s) were already recorded; not recorded again", len(runs) - len(inserted))
    return inserted


def _advance_tasks(rows: list[tuple[str, datetime | None, int]]) -> None:
    """Set ``next_run_at`` and add to ``fire_count`` for many tasks in one statement."""
    if rows:
        store.advance_tasks([store.Advance(*row) for row in rows])
