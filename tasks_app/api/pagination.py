"""The API's lists, paged by the app's one paginator
(:class:`tasks_app.selectors.paging.BoundedPaginator`, the admin's too) through one class,
:class:`Pagination`: by page number on the lists that do not grow with history (tasks,
actions): ``?page=2&page_size=100`` (at most 500); by cursor (keyset, the paginator's cursor
mode) on the run lists: ``Pagination(cursor_ordering=...)``, :data:`RUN_PAGES`.

The page-number lists are counted by the paginator: up to
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

from base64 import b64decode, b64encode
from functools import partial
from typing import Any
from urllib import parse

from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

from ..selectors import paging
from ..selectors.paging import BoundedPaginator, Cursor, KeysetPage


class PageQuerySerializer(serializers.Serializer):
    page = serializers.IntegerField(
        required=False, min_value=1, max_value=2**31 - 1, help_text="1-based page number."
    )
    page_size = serializers.IntegerField(
        required=False, min_value=1, max_value=500, help_text="Items per page (default 50)."
    )


CURSOR_PATTERN = r"^[A-Za-z0-9+/=]*$"  # what the API issues: base64 of the position
# A cursor's offset past the rows sharing its position is at most this (a cursor asking
# more is not one the API issued).
CURSOR_OFFSET_CUTOFF = 1000


class CursorQuerySerializer(serializers.Serializer):
    cursor = serializers.RegexField(
        CURSOR_PATTERN,
        required=False,
        allow_blank=True,  # an empty cursor is the first page
        max_length=2000,
        help_text="Opaque; take it from `next` or `previous`.",
    )
    page_size = serializers.IntegerField(
        required=False, min_value=1, max_value=500, help_text="Items per page (default 50)."
    )


class Pagination(PageNumberPagination):
    """A list's pages: by number, or by cursor when made with ``cursor_ordering``.

    The cursor mode (the run lists): ``?cursor=<from next/previous>&page_size=100``. A page
    costs the same at any depth and in a table of any size (an index range from the cursor's
    position, no ``COUNT(*)``, no ``OFFSET`` over the history), and it is stable while runs
    are added: a run created meanwhile does not shift the next page. The answer is
    ``{"next", "previous", "results"}``. Order: ``cursor_ordering`` (the run lists: newest due
    first, ``run_due_idx``). A bad ``page_size``, or a ``page`` (these lists have no page
    numbers), is a 400 naming the parameter; a cursor this API did not issue is a 404 (no
    such page), as a page number past the last page is on the other lists.
    """

    page_size = 50  # the app's own, whatever the project's REST_FRAMEWORK["PAGE_SIZE"]
    page_size_query_param = "page_size"
    max_page_size = 500
    django_paginator_class = BoundedPaginator
    cursor_query_param = "cursor"

    def __init__(self, *, cursor_ordering: tuple[str, ...] | None = None) -> None:
        self.cursor_ordering = cursor_ordering
        self.keyset: KeysetPage | None = None

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> Any:
        if self.cursor_ordering is not None:
            return self._keyset_page(queryset, request)
        params = request.query_params
        query = PageQuerySerializer(
            data={k: params[k] for k in ("page", "page_size") if k in params}
        )
        if not query.is_valid():
            raise ValidationError(query.errors)
        return super().paginate_queryset(queryset, request, view)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        if self.cursor_ordering is not None:
            return self._cursor_parameters()
        params = super().get_schema_operation_parameters(view)
        bounds = {
            "page": {"minimum": 1, "maximum": 2**31 - 1},
            "page_size": {"minimum": 1, "maximum": self.max_page_size},
        }
        for param in params:
            param["schema"].update(bounds.get(param["name"], {}))
        return params

    def get_paginated_response(self, data: Any) -> Response:
        if self.keyset is not None:
            return Response(
                {
                    "next": self._link(self.keyset.next),
                    "previous": self._link(self.keyset.previous),
                    "results": data,
                }
            )
        response = super().get_paginated_response(data)
        response.data["count_exact"] = self.page.paginator.count_exact
        return response

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        if self.cursor_ordering is not None:
            return self._cursor_response_schema(schema)
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

    # -- the cursor mode ---------------------------------------------------------------------

    def _keyset_page(self, queryset: Any, request: Request) -> list[Any]:
        assert self.cursor_ordering is not None
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
        self.base_url = request.build_absolute_uri()
        size = query.validated_data.get("page_size", self.page_size)
        paginator = self.django_paginator_class(queryset.order_by(*self.cursor_ordering), size)
        self.keyset = paginator.keyset_page(
            _decoded(params.get(self.cursor_query_param)), ordering=self.cursor_ordering
        )
        return self.keyset.rows

    def _link(self, cursor: Cursor | None) -> str | None:
        """The URL of the page at ``cursor``: this request's, its cursor replaced."""
        if cursor is None:
            return None
        tokens = {}
        if cursor.offset != 0:
            tokens["o"] = str(cursor.offset)
        if cursor.reverse:
            tokens["r"] = "1"
        if cursor.position is not None:
            tokens["p"] = cursor.position
        encoded = b64encode(parse.urlencode(tokens, doseq=True).encode("ascii")).decode("ascii")
        return str(replace_query_param(self.base_url, self.cursor_query_param, encoded))

    def _cursor_parameters(self) -> list[dict[str, Any]]:
        return [
            {
                "name": self.cursor_query_param,
                "required": False,
                "in": "query",
                "description": "The pagination cursor value.",
                "schema": {"type": "string", "maxLength": 2000, "pattern": CURSOR_PATTERN},
            },
            {
                "name": self.page_size_query_param,
                "required": False,
                "in": "query",
                "description": "Number of results to return per page.",
                "schema": {"type": "integer", "minimum": 1, "maximum": self.max_page_size},
            },
        ]

    def _cursor_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        link = "http://api.example.org/accounts/?cursor="
        return {
            "type": "object",
            "required": ["next", "previous", "results"],
            "properties": {
                "next": {
                    "type": "string",
                    "nullable": True,
                    "format": "uri",
                    "example": f'{link}cD00ODY%3D"',
                },
                "previous": {
                    "type": "string",
                    "nullable": True,
                    "format": "uri",
                    "example": f"{link}cj0xJnA9NDg3",
                },
                "results": schema,
            },
        }


def _decoded(encoded: str | None) -> Cursor | None:
    """The position a cursor the API issued names; a 404 (no such page) for any other."""
    if encoded is None:
        return None
    try:
        tokens = parse.parse_qs(
            b64decode(encoded.encode("ascii")).decode("ascii"), keep_blank_values=True
        )
        offset = int(tokens.get("o", ["0"])[0])
        if offset < 0:
            raise ValueError(offset)
        offset = min(offset, CURSOR_OFFSET_CUTOFF)
        reverse = bool(int(tokens.get("r", ["0"])[0]))
        position = tokens.get("p", [None])[0]
    except (TypeError, ValueError):
        # Like a page number past the last page: no such page (404), naming the cursor.
        raise NotFound(
            "No such page: the cursor is not one this API issued; "
            "follow the next/previous links as given."
        ) from None
    return Cursor(offset=offset, reverse=reverse, position=position)


# The run lists' pages: by cursor, newest due first (the index run_due_idx).
RUN_PAGES = partial(Pagination, cursor_ordering=("-due_at", "-id"))
# The dead runs' pages: latest death first, as selectors.run_list_dead.
DEAD_RUN_PAGES = partial(Pagination, cursor_ordering=("-finished_at", "-id"))
