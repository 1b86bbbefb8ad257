"""Runs enqueued through Django's task framework (``tasks_app.django_tasks``)."""

from __future__ import annotations

import re
import secrets
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from .. import validation
from ..models import Run, Trigger
from .django_task_paths import ENQUEUED_BY
from .run_create import run_create
from .tasks import task_create

# The action that calls a @task function inside a run (tasks_app/django_tasks/action.py).
ACTION = "django_task"


def django_task_enqueue(
    *,
    path: str,
    args: list[Any],
    kwargs: dict[str, Any],
    queue: str,
    priority: int,
    run_after: datetime | None,
    using: dict[str, Any],
) -> Run:
    """A task of its own for one enqueue of the ``@task`` function at ``path`` (action
    ``django_task``, its arguments and ``using``, how it was enqueued, the payload) and its
    one run, written together.

    The run is due at ``run_after`` (a past instant: now), created by the same service as a
    delayed run, so it is published when the surrounding transaction commits and is as
    precise. Every field is validated as for any task (the queue among ``TASKS_QUEUES``, the
    function importable and its arguments fitting its signature); nothing is written if one
    is refused.
    """
    now = timezone.now()
    due_at, trigger = now, Trigger.MANUAL
    if run_after is not None and run_after > now:
        due_at = validation.check_run_at(run_after, now=now, field="run_after")
        trigger = Trigger.AT
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.rsplit(".", 1)[-1])[:60].strip("-_.") or "task"
    with transaction.atomic():
        task = task_create(
            id=f"{name}-{secrets.token_hex(6)}",
            by=ENQUEUED_BY,
            name=path[:200],
            description="Enqueued with Django's task framework.",
            action=ACTION,
            payload={"task": path, "args": args, "kwargs": kwargs, "using": using},
            queue=queue,
            priority=priority,
        )
        return run_create(task=task, trigger=trigger, due_at=due_at, now=now)
