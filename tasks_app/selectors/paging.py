"""The one paginator of long lists, for the admin's lists and the API's lists: pages by number
with no exact ``COUNT(*)`` over a table that grows with the site, or pages by keyset (the
cursor mode, :meth:`BoundedPaginator.keyset_page`: the API's run lists).

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

In the cursor mode a page starts at a position (a :class:`Cursor`: the value of the list's
first ordering field where the page starts, an offset past the rows that share it, and the
direction) and is read as an index range from there, with one row more than it shows: no
count, no ``OFFSET`` over the history, the same cost at any depth, and a next page that runs
added meanwhile do not shift. The page says the cursors of the pages before and after it
(the position/offset scheme of DRF's ``CursorPagination``, whose cursors the API issues).
"""

from __future__ import annotations

from dataclasses import dataclass
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

    # -- the cursor mode ---------------------------------------------------------------------

    def keyset_page(self, cursor: Cursor | None, *, ordering: tuple[str, ...]) -> KeysetPage:
        """The page of ``per_page`` rows at ``cursor`` (``None``: the first page) of the list
        ordered by ``ordering`` (its first field the position, the others breaking ties),
        with the cursors of the pages around it."""
        offset, reverse, current = (0, False, None) if cursor is None else cursor
        rows: Any = self.object_list
        rows = rows.order_by(*(_reversed(ordering) if reverse else ordering))
        field = ordering[0].lstrip("-")
        if current is not None:
            # (cursor reversed) XOR (list reversed): before the position, else after it
            lookup = "lt" if reverse != ordering[0].startswith("-") else "gt"
            rows = rows.filter(**{f"{field}__{lookup}": current})
        read = list(rows[offset : offset + self.per_page + 1])
        page = read[: self.per_page]
        following = _position(read[-1], field) if len(read) > len(page) else None
        if reverse:
            page.reverse()
            has_next, has_previous = current is not None or offset > 0, following is not None
            next_position, previous_position = current, following
        else:
            has_next, has_previous = following is not None, current is not None or offset > 0
            next_position, previous_position = following, current
        keyset = KeysetPage(rows=page)
        if has_next:
            keyset.next = self._next_cursor(
                page, cursor, field, next_position, previous_position, has_previous
            )
        if has_previous:
            keyset.previous = self._previous_cursor(
                page, cursor, field, next_position, previous_position, has_next
            )
        return keyset

    def _next_cursor(
        self,
        page: list[Any],
        cursor: Cursor | None,
        field: str,
        next_position: str | None,
        previous_position: str | None,
        has_previous: bool,
    ) -> Cursor:
        compare: str | None
        if page and cursor and cursor.reverse and cursor.offset != 0:
            # turning back with an offset: the first position found cannot be the marker
            compare = _position(page[-1], field)
        else:
            compare = next_position
        offset, unique = 0, False
        position: str | None = None
        for row in reversed(page):  # the last row whose position differs from the one after it
            position = _position(row, field)
            if position != compare:
                unique = True
                break
            compare = position
            offset += 1
        if page and not unique:  # no row of the page has a position of its own
            if not has_previous:
                offset, position = self.per_page, None
            elif cursor is not None and cursor.reverse:
                offset, position = 0, previous_position
            else:
                assert cursor is not None
                offset, position = cursor.offset + self.per_page, previous_position
        if not page:
            position = next_position
        return Cursor(offset=offset, reverse=False, position=position)

    def _previous_cursor(
        self,
        page: list[Any],
        cursor: Cursor | None,
        field: str,
        next_position: str | None,
        previous_position: str | None,
        has_next: bool,
    ) -> Cursor:
        compare: str | None
        if page and cursor and not cursor.reverse and cursor.offset != 0:
            compare = _position(page[0], field)
        else:
            compare = previous_position
        offset, unique = 0, False
        position: str | None = None
        for row in page:
            position = _position(row, field)
            if position != compare:
                unique = True
                break
            compare = position
            offset += 1
        if page and not unique:
            if not has_next:
                offset, position = self.per_page, None
            elif cursor is not None and cursor.reverse:
                offset, position = cursor.offset + self.per_page, next_position
            else:
                offset, position = 0, next_position
        if not page:
            position = previous_position
        return Cursor(offset=offset, reverse=True, position=position)


@dataclass(frozen=True)
class Cursor:
    """Where a page of the cursor mode starts: after ``offset`` rows at ``position`` (the
    first ordering field's value, as text; ``None``: the list's start), read backwards
    when ``reverse``."""

    offset: int
    reverse: bool
    position: str | None

    def __iter__(self) -> Any:
        return iter((self.offset, self.reverse, self.position))


@dataclass
class KeysetPage:
    """A page of the cursor mode: its rows, and the cursors of the pages after and before
    it (``None``: there is none)."""

    rows: list[Any]
    next: Cursor | None = None
    previous: Cursor | None = None


def _reversed(ordering: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f[1:] if f.startswith("-") else f"-{f}" for f in ordering)


def _position(row: Any, field: str) -> str:
    return str(row[field] if isinstance(row, dict) else getattr(row, field))
