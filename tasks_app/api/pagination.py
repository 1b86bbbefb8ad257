"""Page-number pagination on the lists that do not grow with history (tasks, actions):
``?page=2&page_size=100`` (at most 500); keyset (cursor) pagination on the run lists
(:class:`RunCursorPagination`).

The page-number lists are counted by the app's one paginator
(:class:`tasks_app.selectors.paging.BoundedPaginator`, the admin's too): up to
:data:`~tasks_app.selectors.paging.COUNT_CAP` matches, or Postgres' estimate for a whole
large table. When the count is not exact ``count_exact`` is false and ``next`` comes from
reading one row past the page, so every page stays reachable however many tasks match.

A ``page`` or ``page_size`` that is not a positive integer (or a size over the maximum) is
a 400 naming the parameter, never silently replaced by the default; a page past the last
one is a 404. Those lists answer ``{"count", "count_exact", "next", "previous",
"results"}``, and the
OpenAPI document says so: a view sets ``pagination_class`` and declares its response as
``Serializer(many=True)``, which drf-spectacular wraps in this envelope.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination, PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response

from ..selectors import paging
from ..selectors.paging import BoundedPaginator


class PageQuerySerializer(serializers.Serializer):
    page = serializers.IntegerField(
        required=False, min_value=1, max_value=2**31 - 1, help_text="1-based page number."
    )
    page_size = serializers.IntegerField(
        required=False, min_value=1, max_value=500, help_text="Items per page (default 50)."
    )


class Pagination(PageNumberPagination):
    page_size = 50  # the app's own, whatever the project's REST_FRAMEWORK["PAGE_SIZE"]
    page_size_query_param = "page_size"
    max_page_size = 500
    django_paginator_class = BoundedPaginator

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> Any:
        params = request.query_params
        query = PageQuerySerializer(
            data={k: params[k] for k in ("page", "page_size") if k in params}
        )
        if not query.is_valid():
            raise ValidationError(query.errors)
        return super().paginate_queryset(queryset, request, view)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        params = super().get_schema_operation_parameters(view)
        bounds = {
            "page": {"minimum": 1, "maximum": 2**31 - 1},
            "page_size": {"minimum": 1, "maximum": self.max_page_size},
        }
        for param in params:
            param["schema"].update(bounds.get(param["name"], {}))
        return params

    def get_paginated_response(self, data: Any) -> Response:
        response = super().get_paginated_response(data)
        response.data["count_exact"] = self.page.paginator.count_exact
        return response

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        out = super().get_paginated_response_schema(schema)
        out["properties"]["count"]["minimum"] = 0
        out["properties"]["count"]["description"] = (
            f"How many items match, counted up to {paging.COUNT_CAP:,}: past that, "
            f"{paging.COUNT_CAP:,} (or, for a whole list of {paging.EXACT_BELOW:,} items or "
            "more, the database's estimate) and count_exact is false."
        )
        out["properties"]["count_exact"] = {
            "type": "boolean",
            "description": "False when count is a bound or an estimate, not the number of matches.",
        }
        out["required"] = ["count", "count_exact", "next", "previous", "results"]
        return out


CURSOR_PATTERN = r"^[A-Za-z0-9+/=]*$"  # what DRF issues: base64 of the position


class CursorQuerySerializer(serializers.Serializer):
    cursor = serializers.RegexField(
        CURSOR_PATTERN,
        required=False,
        allow_blank=True,  # DRF reads an empty cursor as the first page
        max_length=2000,
        help_text="Opaque; take it from `next` or `previous`.",
    )
    page_size = serializers.IntegerField(
        required=False, min_value=1, max_value=500, help_text="Items per page (default 50)."
    )


class RunCursorPagination(CursorPagination):
    """Keyset pagination of run lists: ``?cursor=<from next/previous>&page_size=100``.

    A page costs the same at any depth and in a table of any size (an index range from the
    cursor's position, no ``COUNT(*)``, no ``OFFSET`` over the history), and it is stable
    while runs are added: a run created meanwhile does not shift the next page. The answer
    is ``{"next", "previous", "results"}``. Order: newest due first (``run_due_idx``), or the
    view's ``cursor_ordering``. A bad ``page_size``, or a ``page`` (these lists have no page
    numbers), is a 400 naming the parameter; a cursor this API did not issue is a 404 (no such
    page), as a page number past the last page is on the other lists.
    """

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500
    ordering = ("-due_at", "-id")

    def get_ordering(self, request: Request, queryset: Any, view: Any) -> tuple[str, ...]:
        return tuple(getattr(view, "cursor_ordering", self.ordering))

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> Any:
        params = request.query_params
        if "page" in params:
            raise ValidationError(
                {"page": ["run lists are paginated by cursor: follow the next/previous links"]}
            )
        query = CursorQuerySerializer(
            data={k: params[k] for k in ("cursor", "page_size") if k in params}
        )
        if not query.is_valid():
            raise ValidationError(query.errors)
        try:
            return super().paginate_queryset(queryset, request, view)
        except NotFound:
            # Like a page number past the last page: no such page (404), naming the cursor.
            raise NotFound(
                "No such page: the cursor is not one this API issued; "
                "follow the next/previous links as given."
            ) from None

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        params = super().get_schema_operation_parameters(view)
        for param in params:
            if param["name"] == "page_size":
                param["schema"].update({"minimum": 1, "maximum": self.max_page_size})
            if param["name"] == "cursor":
                param["schema"].update({"maxLength": 2000, "pattern": CURSOR_PATTERN})
        return params

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        out = super().get_paginated_response_schema(schema)
        out["required"] = ["next", "previous", "results"]
        return out
