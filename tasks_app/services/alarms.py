"""The missed-run alarm (a dead man's switch) for tasks with ``alert_after_seconds``.

A recurring task is *in alarm* when a fire it should have made has not completed within
``alert_after_seconds`` of its instant: the fire's run is still waiting, running, failed or
expired, or beat never recorded it at all (``next_run_at`` is that far in the past). The
alarm clears as soon as a later run completes. Entering the alarm logs at ERROR and, when
``TASKS_ALARM_WEBHOOK_URL`` is set, POSTs a JSON notice there through the ``http`` action
(same address checks as any webhook). Beat evaluates alarms on its ticks.

The **schedule-error alarm** is the other kind: when beat cannot compute a task's fires
(its schedule math raised, see ``services.firing``), :func:`schedule_error_raise` flags the
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
from ..models import RECURRING, Task, TaskState
from ..selectors import overdue_fire, paused_filter

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


def alarms_check(*, now: datetime) -> tuple[int, int]:
    """Raise and clear missed-run alarms; returns (raised, cleared)."""
    raised = cleared = 0
    watched = Task.objects.filter(
        alert_after_seconds__isnull=False,
        schedule_type__in=RECURRING,
        state__schedule_error="",
    ).filter(paused_filter(paused=False))
    for task in watched.select_related("state"):
        try:
            fire = overdue_fire(task, now=now)
        except Exception:  # one task's bad row must not stop the other alarms
            log.exception("missed-run check for task %s failed", task.id)
            continue
        if fire is not None and task.state.alarm_since is None:
            note = (
                f"fire at {fire.isoformat()} has not completed within {task.alert_after_seconds} s"
            )
            store.raise_alarm(task_id=task.pk, note=note, now=now)
            log.error("missed-run alarm for task %s: %s", task.id, note, extra={"task_id": task.id})
            _notify(task.id, note, now)
            raised += 1
        elif fire is None and task.state.alarm_since is not None:
            store.clear_alarms(task_ids=[task.pk])
            log.info("missed-run alarm for task %s cleared", task.id, extra={"task_id": task.id})
            cleared += 1
    # Paused or unscheduled tasks are not expected to run: drop their alarms (a schedule
    # error's alarm stays until the task is edited).
    unwatched = list(
        TaskState.objects.filter(alarm_since__isnull=False, schedule_error="")
        .exclude(task__in=watched.values("pk"))
        .values_list("pk", flat=True)
    )
    if unwatched:
        store.clear_alarms(task_ids=unwatched)
    return raised, cleared


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
