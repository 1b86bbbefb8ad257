"""List filters: query parameters validated by a serializer, applied to a queryset.

The API's query parameters, validated and handed to the selectors (which the CLI calls
with its own options).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import QueryDict
from rest_framework import serializers

from .. import selectors
from ..models import Run, Task
from .serializers import RunFilterSerializer, TaskFilterSerializer


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


def filter_tasks(qs: QuerySet[Task], params: QueryDict | dict[str, Any]) -> QuerySet[Task]:
    """``qs`` narrowed by the validated query parameters (``selectors.task_list``)."""
    return qs & selectors.task_list(**_validated(params, TaskFilterSerializer))


def filter_runs(
    qs: QuerySet[Run], params: QueryDict | dict[str, Any], *, dead: bool = False
) -> QuerySet[Run]:
    """``qs`` narrowed by the validated query parameters (``selectors.run_list``), newest
    due first. ``dead``: only runs that ended without success for good (``failed`` after
    their last retry, or ``expired``)."""
    # ``&`` keeps the left side's select_related: name the task join again (one query a page).
    return (
        qs & selectors.run_list(dead=dead, **_validated(params, RunFilterSerializer))
    ).select_related("task")
