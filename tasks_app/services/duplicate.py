"""Copying a task: the admin's *Duplicate* button, usable from any entry point."""

from __future__ import annotations

from django.db import transaction

from ..models import ScheduleType, Task
from . import permissions
from .task_operations import TASK_FIELDS, task_create, task_pause

DUPLICATE_SUFFIX = "-copy"


def task_duplicate(*, task: Task, new_id: str | None = None, by: permissions.Actor = "") -> Task:
    """Create a copy of ``task`` (every field a user sets) under ``new_id``.

    Without ``new_id`` the copy is ``<id>-copy``, then ``<id>-copy-2``, ... whichever is free.
    A copy that would fire on its own (a recurring schedule, or once at a time) starts
    paused with a note, so two identical schedules never fire side by side before someone
    has looked at the copy; an on-demand copy is ready at once. Raises ``ValidationError``
    (the copy is refused by the same checks as any task) or ``ConflictError`` (``new_id``
    is taken); nothing is written then. ``by`` a user needs ``add_task`` (and ``add_run``
    for a copy that fires once: creating it creates its run).
    """
    name = permissions.authorize(by, "duplicate", action=task.action)
    fields = {name: getattr(task, name) for name in TASK_FIELDS}
    fields["name"] = f"{task.name} (copy)" if task.name else ""
    with transaction.atomic():
        copy = task_create(id=new_id or _free_id(task.pk), by=by, **fields)
        if copy.schedule_type != ScheduleType.NONE:
            task_pause(task=copy, note=f"Duplicate of {task.pk}: review, then resume.", by=name)
    return copy


def _free_id(base: str) -> str:
    id_length = Task._meta.get_field("id").max_length or 100
    stem = base[: id_length - len(DUPLICATE_SUFFIX) - 4]
    taken = set(
        Task.objects.filter(pk__startswith=f"{stem}{DUPLICATE_SUFFIX}").values_list("pk", flat=True)
    )
    candidate = f"{stem}{DUPLICATE_SUFFIX}"
    n = 2
    while candidate in taken:
        candidate = f"{stem}{DUPLICATE_SUFFIX}-{n}"
        n += 1
    return candidate
