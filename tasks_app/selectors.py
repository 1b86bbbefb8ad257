"""Reads: lists, filters and schedule previews. No writes here."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from . import scheduling
from .models import Task

MAX_PREVIEW = 100


@dataclass(frozen=True)
class Fire:
    utc: datetime
    local: datetime


def task_preview(*, task: Task, count: int = 5, now: datetime | None = None) -> list[Fire]:
    """The next ``count`` fire instants of ``task``'s schedule, in UTC and in its zone.

    Works on an unsaved task too (the admin form previews before saving). A task with no
    recurring schedule previews its ``once`` instant, or nothing.
    """
    from .services import first_fire, schedule_of

    now = now or timezone.now()
    count = max(1, min(count, MAX_PREVIEW))
    zone = scheduling.get_zone(task.timezone or "UTC")
    if task.schedule_type == "once":
        fires = [task.run_at] if task.run_at and task.run_at > now else []
    else:
        start = task.next_run_at if (task.pk and task.next_run_at and task.next_run_at > now) else first_fire(task, now=now)
        schedule = schedule_of(task, anchor=start) if start else None
        fires = [] if start is None or schedule is None else [start, *scheduling.next_fires(schedule, start, count - 1)]
        if task.end_at:
            fires = [f for f in fires if f <= task.end_at]
    return [Fire(utc=f, local=f.astimezone(zone)) for f in fires[:count]]
