"""Finished runs counted once each, for ``/metrics`` (``tasks_runs_total`` and the start-lateness
histogram), in time that does not grow with the history.

Counting the runs table at every scrape would grow with history and go backwards when
retention deletes rows. Instead the tally (``RunTally``: per status and action,
runs, lateness count, sum and buckets) absorbs the runs finished since its mark
(``RunTallyMark.through``) up to ``TALLY_LAG`` ago, through the partial index on
``finished_at``; a scrape adds the few runs finished after the mark on the fly
(:func:`tasks_app.selectors.run_tally_totals`). So the figures are exact at every scrape, a
counter in the Prometheus sense, and neither retention nor deleting a task takes them back.

The lag covers a completion whose ``finished_at`` (the worker's clock) is committed after the
mark has passed it; a commit later than ``TALLY_LAG`` would not be counted. The first scrape
after an upgrade counts every finished run once (one scan; later ones read minutes).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from django.db import transaction

from .. import store
from ..models import RunTally, RunTallyMark
from ..selectors.runs import tally_rows

TALLY_LAG = timedelta(seconds=30)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def run_tally_advance(*, now: datetime, edges: Sequence[float]) -> datetime:
    """Move the tally's mark to ``now - TALLY_LAG``, counting the runs finished in between.

    One scraper at a time advances it (the mark row is locked with ``SKIP LOCKED``; a second
    scraper finds it taken and leaves it). ``edges`` are the lateness bucket bounds in ms; they
    must stay the same across calls. Returns the mark (the tally counts runs finished before).
    """
    until = now - TALLY_LAG
    with transaction.atomic():
        store.start_tally_mark(epoch=EPOCH)
        mark = RunTallyMark.objects.select_for_update(skip_locked=True).filter(pk=1).first()
        if mark is None:  # another scraper is advancing it
            return RunTallyMark.objects.get(pk=1).through
        if mark.through >= until:
            return mark.through
        rows = tally_rows(since=mark.through, until=until, edges=edges)
        tallies = {(t.status, t.action): t for t in RunTally.objects.select_for_update()}
        changed = {(status, action) for status, action, *_ in rows}
        for status, action, bucket, count, sum_ms in rows:
            tally = tallies.get((status, action))
            if tally is None:
                tally = tallies[(status, action)] = RunTally(status=status, action=action)
            buckets = list(tally.lateness_buckets) or [0] * (len(edges) + 1)
            tally.runs += count
            if bucket is not None:
                buckets[bucket] += count
                tally.lateness_count += count
                tally.lateness_sum_ms += float(sum_ms)
            tally.lateness_buckets = buckets
        for key in changed:
            tallies[key].save()
        mark.through = until
        mark.save(update_fields=["through"])
        return until
