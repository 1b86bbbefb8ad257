"""The audit trail: who changed what on a task, from what, to what; each entry is also a
line of the processes' logs naming who (``task <id> <event> by <who>``)."""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

from ..models import TaskAuditEntry

log = logging.getLogger(__name__)


def plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else jsonable(value)


def audit(
    task_id: str, event: str, *, by: str = "", changes: dict[str, Any] | None = None, note: str = ""
) -> None:
    TaskAuditEntry.objects.create(
        task_id=task_id, event=event, by=by, changes=changes or {}, note=note
    )
    log.info("task %s %s by %s", task_id, event, by or "-", extra={"task_id": task_id, "by": by})


def audits(entries: list[TaskAuditEntry]) -> None:
    """Write ``entries``: one as :func:`audit` writes and logs it; more in statements of
    thousands, without a log line each (a set written at once)."""
    if len(entries) == 1:
        (entry,) = entries
        audit(entry.task_id, entry.event, by=entry.by, changes=entry.changes, note=entry.note)
    elif entries:
        TaskAuditEntry.objects.bulk_create(entries, batch_size=5000)


def jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value
