"""The one paginator of long lists, for the admin's lists and the API's page-number lists: no
exact ``COUNT(*)`` over a table that grows with the site.

An exact count costs time in proportion to the matches (every row of a large table is read
to count it). Here:

- the unfiltered list takes Postgres' own estimate of the table's rows (``pg_class.reltuples``,
  kept by autovacuum/ANALYZE) when it is over ``EXACT_BELOW`` — "about 20,000,000 runs";
- a filtered list counts at most ``COUNT_CAP`` rows (``SELECT count(*) FROM (... LIMIT n)``)
  and says "more than 10,000" past that (a search or a filter that matches many tasks);
- small tables are counted exactly.

``count_kind`` says which it was (``exact``, ``estimate``, ``more``), ``count_exact`` whether
the count is the number of matches, ``count_prefix`` how a page words it. Pages are still
addressed by number, and when the count is not exact every page past it stays reachable: a
page is read with one row more than it shows, which says whether a next page exists. A page
far down a huge list costs its ``OFFSET``, which the newest-first default never needs.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django.core.paginator import EmptyPage, Page, Paginator

from .. import store

EXACT_BELOW = 50_000
COUNT_CAP = 10_000


def table_estimate(table: str) -> int:
    """Postgres' estimate of a table's rows (``-1``: never analysed)."""
    return store.table_estimate(table)


class BoundedPage(Page):  # type: ignore[type-arg]
    """A page of a list whose count is not exact: whether a next page exists is known from
    the extra row read with it, not from the count."""

    more = False

    def has_next(self) -> bool:
        return self.more


class BoundedPaginator(Paginator):  # type: ignore[type-arg]
    """A paginator whose ``count`` is bounded (see the module's docstring)."""

    count_kind = "exact"

    @cached_property
    def count(self) -> int:
        rows: Any = self.object_list
        query = getattr(rows, "query", None)
        if query is None:
            return len(rows)
        if not query.where:  # the whole table: Postgres' estimate, when it is large
            estimate = table_estimate(rows.model._meta.db_table)
            if estimate >= EXACT_BELOW:
                self.count_kind = "estimate"
                return estimate
        # the ids alone: no column, join or annotation of the rows is read to count them
        bounded = int(rows.order_by().values("pk")[: COUNT_CAP + 1].count())
        if bounded > COUNT_CAP:
            self.count_kind = "more"
            return COUNT_CAP
        return bounded

    @property
    def count_exact(self) -> bool:
        self.count  # noqa: B018  (counting decides the kind)
        return self.count_kind == "exact"

    @property
    def count_prefix(self) -> str:
        return {"estimate": "about ", "more": "more than "}.get(self.count_kind, "")

    def validate_number(self, number: Any) -> int:
        try:
            return int(super().validate_number(number))
        except EmptyPage:
            if self.count_exact or int(number) < 1:
                raise
            return int(number)  # past the counted pages: the page read says if it exists

    def page(self, number: Any) -> Any:
        number = self.validate_number(number)
        if self.count_exact or number < self.num_pages:  # a next page exists: the count says so
            return super().page(number)
        bottom = (number - 1) * self.per_page
        rows = list(self.object_list[bottom : bottom + self.per_page + 1])
        if not rows and number > 1:
            raise EmptyPage("That page contains no results")
        page = BoundedPage(rows[: self.per_page], number, self)
        page.more = len(rows) > self.per_page
        return page
