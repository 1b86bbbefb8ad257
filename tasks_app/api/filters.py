"""List filters: query parameters validated by a serializer, applied to a queryset.

Read-only helpers for the API and ``manage.py tasks`` (both list the same way).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from django.http import QueryDict
from rest_framework import serializers

from ..models import FINAL_RUN_STATUSES, Run, Task
from ..selectors import run_list_dead
from .serializers import RunFilterSerializer, TaskFilterSerializer

RANGES = {
    "next_run": "next_run_at",
    "created": "created_at",
    "due": "due_at",
    "started": "started_at",
    "finished": "finished_at",
}


def query_values(
    params: QueryDict | dict[str, Any], serializer: serializers.Serializer
) -> dict[str, Any]:
    """Plain values for ``serializer``: lists for multiple-choice fields, strings otherwise."""
    out: dict[str, Any] = {}
    for name, field in serializer.fields.items():
        if name not in params:
            continue
        if isinstance(field, serializers.MultipleChoiceField):
            raw = params.getlist(name) if isinstance(params, QueryDict) else params[name]
            values = raw if isinstance(raw, list) else [raw]
            out[name] = [v for item in values for v in str(item).split(",") if v]
        else:
            out[name] = params[name]
    return out


def _validated(
    params: QueryDict | dict[str, Any], serializer_class: type[serializers.Serializer]
) -> dict[str, Any]:
    serializer = serializer_class(data=query_values(params, serializer_class()))
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def _ranges(qs: QuerySet[Any], values: dict[str, Any]) -> QuerySet[Any]:
    for prefix, column in RANGES.items():
        if values.get(f"{prefix}_after") is not None:
            qs = qs.filter(**{f"{column}__gte": values[f"{prefix}_after"]})
        if values.get(f"{prefix}_before") is not None:
            qs = qs.filter(**{f"{column}__lt": values[f"{prefix}_before"]})
    return qs


def filter_tasks(qs: QuerySet[Task], params: QueryDict | dict[str, Any]) -> QuerySet[Task]:
    values = _validated(params, TaskFilterSerializer)
    if values.get("status"):
        qs = qs.filter(status__in=values["status"])
    if values.get("action"):
        qs = qs.filter(action=values["action"])
    if values.get("schedule_type"):
        qs = qs.filter(schedule_type__in=values["schedule_type"])
    if values.get("paused") is not None:
        qs = qs.filter(paused=values["paused"])
    if values.get("search"):
        term = values["search"]
        qs = qs.filter(Q(id__icontains=term) | Q(name__icontains=term))
    return _ranges(qs, values).order_by("id")


def filter_runs(
    qs: QuerySet[Run], params: QueryDict | dict[str, Any], *, dead: bool = False
) -> QuerySet[Run]:
    """Runs, newest due first. ``dead``: only runs that ended without success for good
    (``failed`` after their last retry, or ``expired``)."""
    values = _validated(params, RunFilterSerializer)
    if dead:
        qs = qs.filter(pk__in=run_list_dead().values("pk"))
    if values.get("status"):
        qs = qs.filter(status__in=values["status"])
    if values.get("trigger"):
        qs = qs.filter(trigger__in=values["trigger"])
    if values.get("action"):
        qs = qs.filter(task__action=values["action"])
    if values.get("task"):
        qs = qs.filter(task_id=values["task"])
    return _ranges(qs, values).select_related("task").order_by("-due_at", "-created_at")


__all__ = ["FINAL_RUN_STATUSES", "filter_runs", "filter_tasks"]
