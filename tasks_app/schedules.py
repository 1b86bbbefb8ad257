"""Schedules declared in code: ``Schedule(id, **fields)``, listed in ``SCHEDULES`` of the
module named by ``TASKS_SCHEDULES_MODULE``, applied by ``manage.py tasks sync``.

::

    # project/schedules.py
    from tasks_app.schedules import Schedule

    SCHEDULES = [
        Schedule(
            "nightly-report",
            action="command",
            payload={"command": "check"},
            schedule_type="cron",
            cron="0 3 * * *",
            timezone="Europe/Paris",
            max_retries=2,
        ),
    ]

The keywords are the REST API's task fields (``action``, ``payload``, ``schedule_type``,
``interval_seconds``, ``cron``, ``timezone``, ``run_at``, the policies, ``queue``,
``priority``, ...); a field left out takes its default, as in a ``POST /api/tasks``, so a
definition states the whole task. ``manage.py tasks sync`` checks every definition with the
API's rules before it writes anything, then creates, updates and removes tasks to match the
list, in one transaction (``--plan`` shows the difference, ``--check`` exits 1 while there
is one). See ``tasks_app.services.schedules_sync``.

A ``@task`` function's policies are declared beside them, with no schedule: its calls are
its runs, and ``function_policy`` names the function's task for you::

    from myapp.tasks import send_welcome_email

    SCHEDULES = [
        function_policy(send_welcome_email, max_retries=3, retry_backoff_seconds=30),
    ]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .django_tasks.framework import ACTION, function_task_id


@dataclass(frozen=True, init=False)
class Schedule:
    """One task, as code declares it: its id and its fields (keywords of the REST API)."""

    id: str
    fields: dict[str, Any] = field(default_factory=dict)

    def __init__(self, id: str, /, **fields: Any) -> None:
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "fields", dict(fields))


def function_policy(function: Any, /, **fields: Any) -> Schedule:
    """The task of the ``@task`` ``function`` (or its dotted path), the one its enqueues
    run under, with these policies (``max_retries``, ``retry_backoff_seconds``,
    ``timeout_seconds``, ``expires_after_seconds``, ``overlap_policy``, ``queue``,
    ``priority``, ``pause_after_failures``, ...). Declared, it is read-only elsewhere; chosen
    in code, the function needs no ``TASKS_DJANGO_TASKS`` entry."""
    path = function if isinstance(function, str) else function.module_path
    fields.setdefault("name", path[:200])
    return Schedule(function_task_id(path), action=ACTION, payload={"task": path}, **fields)
