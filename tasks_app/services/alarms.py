"""The missed-run alarm (a dead man's switch) for tasks with ``alert_after_seconds``.

A recurring task is *in alarm* when a fire it should have made has not completed within
``alert_after_seconds`` of its instant: the fire's run is still waiting, running, failed or
expired, or beat never recorded it at all (``next_run_at`` is that far in the past). The
alarm clears as soon as a later run completes. Entering the alarm logs at ERROR and, when
``TASKS_ALARM_WEBHOOK_URL`` is set, POSTs a JSON notice there through the ``http`` action
(same address checks as any webhook). Beat evaluates alarms on its ticks.

The **schedule-error alarm** is the other kind: when beat cannot compute a task's fires
(its schedule math raised, see ``beat.firing``), :func:`schedule_error_raise` flags the
task (``TaskState.schedule_error``, which makes beat skip it) and raises its alarm with the
reason, in the same fields, so the admin, the overview, ``/api/health`` and ``/metrics`` show
it like any alarm. It stays until an edit through the services clears it
(:func:`schedule_errors_clear`); the missed-run check leaves flagged tasks alone. Both live
in the task's state row, written through the store's named statements: the task's own row
is its configuration, which only a person's edit or a sync writes.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime

from django.db import transaction

from .. import actions, store
from ..conf import app_settings

log = logging.getLogger(__name__)


def schedule_error_raise(task_id: str, *, error: BaseException, now: datetime) -> None:
    """Flag ``task_id``: beat skips it until it is edited; its alarm carries the reason."""
    note = (
        f"beat skips this task until it is edited: its schedule could not be computed "
        f"({type(error).__name__}: {error})"
    )[:1000]
    store.raise_schedule_error(task_id=task_id, note=note, now=now)
    log.error("schedule error for task %s: %s", task_id, note, extra={"task_id": task_id})
    transaction.on_commit(lambda: _notify(task_id, note, now))


def schedule_errors_clear(task_ids: list[str]) -> int:
    """The tasks ``task_ids`` were edited: their schedule-error flags and those alarms are
    cleared, so beat fires them again; how many were flagged."""
    if not task_ids:
        return 0
    return store.clear_schedule_errors(task_ids=task_ids)


def _notify(task_id: str, note: str, now: datetime) -> None:
    url = app_settings.ALARM_WEBHOOK_URL
    if not url:
        return

    def post() -> None:

        try:
            http = actions.get("http")
            ctx = actions.RunContext(
                run_id="alarm",
                task_id=task_id,
                attempt=1,
                scheduled_for=now,
                due_at=now,
                timeout_seconds=10,
            )
            http.func(
                {
                    "url": url,
                    "method": "POST",
                    "json": {"task_id": task_id, "alarm": note, "at": now.isoformat()},
                },
                ctx,
            )
        except Exception:
            log.exception("alarm webhook for task %s failed", task_id)

    threading.Thread(target=post, name=f"alarm-{task_id}", daemon=True).start()
