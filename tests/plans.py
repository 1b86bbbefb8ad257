"""The plan Postgres picks for a statement a page sends, with some ways of reading a whole
table priced out: on the tests' tiny tables a scan is cheapest, while at 1,000,000 rows
Postgres reaches for the index on its own. A page whose query no index can serve costs time
in proportion to the rows."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

EVERY_SCAN = ("seqscan", "indexscan", "indexonlyscan")


@contextmanager
def scans_priced_out(scans: Iterable[str] = EVERY_SCAN) -> Iterator[None]:
    """Inside: a transaction in which the planner treats ``scans`` as prohibitively dear
    (``queryset.explain()`` here shows the plan it would pick at scale)."""
    with transaction.atomic(), connection.cursor() as cursor:
        for scan in scans:
            cursor.execute(f"SET LOCAL enable_{scan} = off")
        yield


def plan(sql: str, priced_out: Iterable[str] = EVERY_SCAN) -> str:
    """``EXPLAIN`` of ``sql`` (a statement as Django sent it) with ``priced_out`` off."""
    with scans_priced_out(priced_out), connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}")
        return "\n".join(row[0] for row in cursor.fetchall())


def sent(call: Callable[[], object], *fragments: str) -> str:
    """The one statement ``call`` sends that holds every fragment of ``fragments``."""
    with CaptureQueriesContext(connection) as queries:
        call()
    found = [q["sql"] for q in queries.captured_queries if all(f in q["sql"] for f in fragments)]
    assert len(found) == 1, (fragments, [q["sql"] for q in queries.captured_queries])
    return found[0]
