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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, init=False)
class Schedule:
    """One task, as code declares it: its id and its fields (keywords of the REST API)."""

    id: str
    fields: dict[str, Any] = field(default_factory=dict)

    def __init__(self, id: str, /, **fields: Any) -> None:
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "fields", dict(fields))
