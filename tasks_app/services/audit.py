"""The audit trail: who changed what on a task, from what, to what."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ..models import TaskAuditEntry


def plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else jsonable(value)


def audit(
    task_id: str, event: str, *, by: str = "", changes: dict[str, Any] | None = None, note: str = ""
) -> None:
    TaskAuditEntry.objects.create(
        task_id=task_id, event=event, by=by, changes=changes or {}, note=note
    )


def jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value
