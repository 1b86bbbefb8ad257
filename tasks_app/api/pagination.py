"""Page-number pagination on the lists that do not grow with history (tasks, actions):
``?page=2&page_size=100`` (at most 500); keyset (cursor) pagination on the run lists
(:class:`RunCursorPagination`).

The page-number lists count their matches up to :data:`COUNT_CAP` (:class:`BoundedPaginator`):
an exact count costs time in proportion to the matches (a search matching a tenth of a
million tasks reads every one of them), a bounded one does not. Past the cap, ``count`` is
the cap and ``count_exact`` is false; ``next`` then comes from reading one row past the
page, so every page stays reachable however many tasks match.

A ``page`` or ``page_size`` that is not a positive integer (or a size over the maximum) is
a 400 naming the parameter, never silently replaced by the default; a page past the last
one is a 404. Those lists answer ``{"count", "count_exact", "next", "previous",
"results"}``, and the
OpenAPI document says so: a view sets ``pagination_class`` and declares its response as
``Serializer(many=True)``, which drf-spectacular wraps in this envelope.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django.core.paginator import EmptyPage, Page, Paginator
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination, PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response


class PageQuerySerializer(serializers.Serializer):
    page = serializers.IntegerField(
        required=False, min_value=1, max_value=2**31 - 1, help_text="1-based page number."
    )
    page_size = serializers.IntegerField(
        required=False, min_value=1, max_value=500, help_text="Items per page (default 50)."
    )


COUNT_CAP = 10_000


class BoundedPage(Page):  # type: ignore[type-arg]
    """A page of a list counted only up to the cap: whether a next page exists is known
    from the extra row read with it, not from the count."""

    more = False

    def has_next(self) -> bool:
        return self.more


class BoundedPaginator(Paginator):  # type: ignore[type-arg]
    """A paginator whose ``count`` stops at :data:`COUNT_CAP` (``count_exact`` says whether
    it did); pages past the cap are still served."""

    count_exact = True

    @cached_property
    def count(self) -> int:
        rows: Any = self.object_list
        if getattr(rows, "query", None) is None:
            return len(rows)
        counted = int(rows.order_by()[: COUNT_CAP + 1].count())
        if counted > COUNT_CAP:
            self.count_exact = False
            return COUNT_CAP
        return counted

    def validate_number(self, number: Any) -> int:
        try:
            return int(super().validate_number(number))
        except EmptyPage:
            if self.count_exact or int(number) < 1:
                raise
            return int(number)  # past the counted pages: the page read says if it exists

    def page(self, number: Any) -> Any:
        number = self.validate_number(number)
        if self.count_exact:
            return super().page(number)
        bottom = (number - 1) * self.per_page
        rows = list(self.object_list[bottom : bottom + self.per_page + 1])
        if not rows:
            raise EmptyPage("That page contains no results")
        page = BoundedPage(rows[: self.per_page], number, self)
        page.more = len(rows) > self.per_page
        return page


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
            f"How many items match, counted up to {COUNT_CAP:,}: past that, {COUNT_CAP:,} "
            "and count_exact is false."
        )
        out["properties"]["count_exact"] = {
            "type": "boolean",
            "description": "False when more items match than count says.",
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
