"""Stored rows in tests: what a refused input must leave untouched (the counts of every
table it could write), and fixtures that put a run or a task's state in a given status."""

from typing import Any

from django_celery_beat.models import PeriodicTask

from tasks_app.models import Run, Task, TaskAuditEntry, TaskState, allow_status_writes
from tasks_app.store import RUN_TRANSITIONS


def counts() -> tuple[int, int, int, int]:
    """Tasks, runs, django-celery-beat entries and audit entries."""
    return (
        Task.objects.count(),
        Run.objects.count(),
        PeriodicTask.objects.count(),
        TaskAuditEntry.objects.count(),
    )


def _path(old: str, new: str) -> list[str]:
    """The shortest walk from ``old`` to ``new`` along store.RUN_TRANSITIONS (``old`` left out)."""
    paths = {old: [old]}
    frontier = [old]
    while frontier and new not in paths:
        following = []
        for status in frontier:
            for nxt in sorted(RUN_TRANSITIONS[status]):
                if nxt not in paths:
                    paths[nxt] = [*paths[status], nxt]
                    following.append(nxt)
        frontier = following
    if new not in paths:
        raise AssertionError(f"a run cannot move from {old} to {new} (store.RUN_TRANSITIONS)")
    return paths[new][1:]


def run_set(pk: Any, **fields: Any) -> None:
    """Put a stored run in the state a test needs: its status walked along the allowed
    transitions to ``fields["status"]`` (the database refuses any other change), then the
    other fields written. A fixture, so it may write statuses through the ORM."""
    status = fields.pop("status", None)
    with allow_status_writes():
        rows = Run.objects.filter(pk=pk)
        if status is not None:
            current = rows.values_list("status", flat=True).get()
            for step in _path(current, status) if current != status else []:
                rows.update(status=step)
        if fields:
            rows.update(**fields)


def state_set(pk: Any, **fields: Any) -> None:
    """Write a task's state row as a test needs it (status included)."""
    with allow_status_writes():
        TaskState.objects.filter(pk=pk).update(**fields)
