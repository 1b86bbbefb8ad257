"""Missed-run alarms, checked by beat: a task whose fire is overdue (or that failed too often)
is put in alarm and its owners told; one back on time is cleared."""

from __future__ import annotations

import logging
from datetime import datetime

from .. import store
from ..models import RECURRING, Task, TaskState
from ..selectors import overdue_fire, paused_filter
from ..services.alarms import _notify

log = logging.getLogger(__name__)


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
