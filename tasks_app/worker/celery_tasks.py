"""Celery entry points: fetch by id, call a service. No rules live here."""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

from billiard.einfo import ExceptionInfo
from celery import Task as CeleryTask
from celery import shared_task
from celery.exceptions import Reject, SoftTimeLimitExceeded, TimeLimitExceeded
from celery.signals import beat_init, task_prerun, worker_init, worker_process_init, worker_ready
from django.db import close_old_connections, connection

from .. import services
from ..models import Run, Task, Trigger
from ..observability import health  # noqa: F401  (starts the worker heartbeat)
from ..runtime import hardening
from ..services.run_lifecycle import DB_ERRORS, run_lost
from ..services.time_limits import timed_out_error
from ..vocabulary.choices import EXECUTE_RUN
from . import (
    recovery,
    run_execution,
    shutdown,  # noqa: F401  (the worker's shutdown grace)
)

log = logging.getLogger(__name__)
# Before a message is handed back while the database is down, so redelivery is not a hot loop.
DB_DOWN_PAUSE_SECONDS = 1.0


# A worker process whose previous task started less than this long ago keeps its database
# connection without Django's health check (a ``SELECT 1`` round trip per run at full speed).
# A connection that broke in between fails the claim, and the message is handed back (below).
HEALTH_CHECK_IDLE_SECONDS = 1.0
_last_task_at = -HEALTH_CHECK_IDLE_SECONDS


@task_prerun.connect
def check_connections(sender: CeleryTask | None = None, **_: Any) -> None:
    """Before each task, drop a database connection that is broken, in error or older than
    ``CONN_MAX_AGE``, and, if it sat idle, have the next query health-check it
    (``CONN_HEALTH_CHECKS``) — what Django does around each web request.
    ``CELERY_DB_REUSE_MAX`` stops Celery from closing the connection around every task
    instead, which cost a new Postgres connection per run."""
    global _last_task_at
    if sender is not None and getattr(sender.request, "is_eager", False):
        return
    close_old_connections()
    now = time.monotonic()
    if now - _last_task_at < HEALTH_CHECK_IDLE_SECONDS:
        connection.health_check_done = True  # type: ignore[attr-defined]
    _last_task_at = now


@worker_init.connect
@worker_process_init.connect
@beat_init.connect
def make_non_dumpable(**_: Any) -> None:
    """The worker's main process before it forks its pool, each pool process again (what a
    fork inherits, a pool restarted by another path gets too), and beat: none can be read
    through ``/proc`` or ptrace by a same-user program, e.g. one the ``exec`` action runs
    (``tasks_app.runtime.hardening``)."""
    hardening.make_non_dumpable()


@worker_ready.connect
@worker_process_init.connect
def freeze_startup_objects(**_: Any) -> None:
    """Move everything a worker process holds once started (Django, Celery, the app) out of
    the garbage collector's reach. Otherwise each full collection walks all of it, and the
    runs due during that pause start late."""
    gc.collect()
    gc.freeze()


class RunTask(CeleryTask):
    """Base of ``execute_run``. Its ``on_failure`` runs in the worker's main process when the
    pool killed the child at the hard time limit: the run is recorded as timed out there,
    since the child that would have recorded it is gone."""

    def on_failure(
        self, exc: Exception, task_id: str, args: Any, kwargs: Any, einfo: ExceptionInfo | None
    ) -> None:
        if not isinstance(exc, TimeLimitExceeded):
            return
        run_id = str(args[0]) if args else task_id
        try:
            close_old_connections()
            run = Run.objects.select_related("task").filter(pk=run_id).first()
            if run is not None:
                run_lost(run_id=run_id, error=timed_out_error(run.task, "killed at the hard limit"))
        except Exception:  # the sweep fails the run when its lease lapses
            log.exception("recording the hard time limit of run %s failed", run_id)


@shared_task(
    name=EXECUTE_RUN,
    bind=True,
    base=RunTask,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    store_errors_even_if_ignored=True,
)
def execute_run(self: CeleryTask, run_id: str) -> dict[str, object] | None:
    """Execute one run. The message id is the run id; duplicates are ignored by the claim.

    The ``Run`` row is the run's record (status, worker, times, output, error), so a
    successful message stores no Celery result (that row cost four queries per run); an
    exception escaping this task (a bug, not an action's failure) is still stored with its
    traceback, which the admin's run page shows.

    While the database is unreachable the message is handed back to the broker (after a
    pause) instead of being acknowledged, so the run is tried again, not dropped.
    """
    try:
        with recovery.lease(run_id) as finishing:
            run = run_execution.run_execute(
                run_id=run_id, worker=self.request.hostname or "", before_outcome=finishing
            )
    except DB_ERRORS as exc:
        log.warning("database unavailable for run %s; message requeued: %s", run_id, exc)
        close_old_connections()
        time.sleep(DB_DOWN_PAUSE_SECONDS)
        raise Reject(f"database unavailable: {exc}", requeue=True) from exc
    except SoftTimeLimitExceeded:  # the limit struck outside the action (claim or record)
        task = Task.objects.filter(runs__id=run_id).first()
        lost = (
            None
            if task is None
            else run_lost(run_id=run_id, error=timed_out_error(task), executor=True)
        )
        return None if lost is None else {"run_id": run_id, "status": lost.status}
    if run is None:
        return None
    return {"run_id": str(run.id), "status": run.status}


@shared_task(name=services.EXECUTE_TASK)
def execute_task(task_id: str) -> str | None:
    """'Run now' for a task, as sent by django-celery-beat's admin action on its entry."""
    task = Task.objects.filter(pk=task_id).first()
    if task is None:
        return None
    run = services.task_execute(task=task, trigger=Trigger.MANUAL, by="django-celery-beat")
    return str(run.id)
