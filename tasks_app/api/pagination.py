"""Page-number pagination on every list: ``?page=2&page_size=100`` (at most 500)."""

from __future__ import annotations

from rest_framework.pagination import PageNumberPagination


class Pagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 500
