"""Page-number pagination on every list: ``?page=2&page_size=100`` (at most 500).

A ``page`` or ``page_size`` that is not a positive integer (or a size over the maximum) is
a 400 naming the parameter, never silently replaced by the default; a page past the last
one is a 404. Every list answers ``{"count", "next", "previous", "results"}``, and the
OpenAPI document says so: a view sets ``pagination_class`` and declares its response as
``Serializer(many=True)``, which drf-spectacular wraps in this envelope.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request


class PageQuerySerializer(serializers.Serializer):
    page = serializers.IntegerField(
        required=False, min_value=1, max_value=2**31 - 1, help_text="1-based page number."
    )
    page_size = serializers.IntegerField(
        required=False, min_value=1, max_value=500, help_text="Items per page (default 50)."
    )


class Pagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 500

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

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        out = super().get_paginated_response_schema(schema)
        out["properties"]["count"]["minimum"] = 0
        out["required"] = ["count", "next", "previous", "results"]
        return out
