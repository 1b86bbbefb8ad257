"""Pieces the service modules share: the conflict error, the audit trail, next_run_at."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.db.models import Case, F, Min, OuterRef, Subquery, When

from ..models import (
    RECURRING,
    Run,
    RunStatus,
    TaskAuditEntry,
)


class ConflictError(Exception):
    """The request is valid but conflicts with the current state (HTTP 409)."""


def next_run_at_expr() -> Any:
    """Recurring tasks keep their planned fire; others show their earliest waiting run."""
    earliest = (
        Run.objects.filter(task=OuterRef("pk"), status__in=[RunStatus.PENDING, RunStatus.QUEUED])
        .values("task")
        .annotate(first=Min("due_at"))
        .values("first")
    )
    return Case(
        When(schedule_type__in=RECURRING, then=F("next_run_at")),
        default=Subquery(earliest),
    )


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
