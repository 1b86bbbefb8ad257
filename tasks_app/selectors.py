"""Reads: lists, filters and schedule previews. No writes here."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from . import scheduling
from .models import Run, RunStatus, Task

MAX_PREVIEW = 100
DEAD_STATUSES = (RunStatus.FAILED, RunStatus.EXPIRED)


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
        start = (
            task.next_run_at
            if (task.pk and task.next_run_at and task.next_run_at > now)
            else first_fire(task, now=now)
        )
        schedule = schedule_of(task, anchor=start) if start else None
        fires = (
            []
            if start is None or schedule is None
            else [start, *scheduling.next_fires(schedule, start, count - 1)]
        )
        if task.end_at:
            fires = [f for f in fires if f <= task.end_at]
    return [Fire(utc=f, local=f.astimezone(zone)) for f in fires[:count]]


def tasks_in_alarm() -> QuerySet[Task]:
    """Tasks whose missed-run alarm is raised (see ``tasks_app.alarms``), oldest alarm first."""
    return Task.objects.filter(alarm_since__isnull=False).order_by("alarm_since")


def run_list_dead(*, task_id: str | None = None) -> QuerySet[Run]:
    """Dead runs: ``failed`` with their retries exhausted (a run only ends ``failed``, not
    ``retrying``, after its last attempt) or ``expired``, and not retried by hand since,
    newest first. A dead run stops being dead once a later attempt of it exists.
    """
    later_attempt = Run.objects.filter(
        Q(first_attempt_id=Coalesce(OuterRef("first_attempt_id"), OuterRef("id"))),
        attempt__gt=OuterRef("attempt"),
    )
    qs = Run.objects.filter(status__in=DEAD_STATUSES).filter(~Exists(later_attempt))
    if task_id is not None:
        qs = qs.filter(task_id=task_id)
    return qs.select_related("task").order_by("-finished_at", "-due_at")


def run_attempts(*, run: Run) -> QuerySet[Run]:
    """Every attempt of the run ``run`` belongs to (the first attempt and its retries), in order."""
    first = run.first_attempt_id or run.id
    return Run.objects.filter(Q(pk=first) | Q(first_attempt_id=first)).order_by("attempt")
