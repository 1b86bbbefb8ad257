"""Reads about runs: lists, dead runs, attempts. No writes here."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.functions import Coalesce

from ..models import Run, RunStatus
from .tasks import in_ranges

DEAD_STATUSES = (RunStatus.FAILED, RunStatus.EXPIRED)
RUN_RANGES = {
    "due": "due_at",
    "created": "created_at",
    "started": "started_at",
    "finished": "finished_at",
}


def run_list(
    *,
    task: str | None = None,
    status: list[str] | None = None,
    trigger: list[str] | None = None,
    action: str | None = None,
    dead: bool = False,
    **ranges: datetime | None,
) -> QuerySet[Run]:
    """Runs, newest due first, filtered (each filter optional; ``ranges`` as in
    :data:`RUN_RANGES`). ``dead``: only runs that ended without success for good."""
    qs = run_list_dead() if dead else Run.objects.all()
    if task:
        qs = qs.filter(task_id=task)
    if status:
        qs = qs.filter(status__in=status)
    if trigger:
        qs = qs.filter(trigger__in=trigger)
    if action:
        qs = qs.filter(task__action=action)
    return (
        in_ranges(qs, RUN_RANGES, ranges).select_related("task").order_by("-due_at", "-created_at")
    )


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
