"""Reads about runs: lists, dead runs, attempts. No writes here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.db.models.functions import Coalesce

from .. import store
from ..models import FINAL_RUN_STATUSES, Run, RunStatus, RunTally
from .task_reads import FIRES_COUNTED, in_ranges

DEAD_STATUSES = (RunStatus.FAILED, RunStatus.EXPIRED)
# The statuses that end a run for good: a ``retrying`` or ``interrupted`` attempt always has
# a next attempt (created in the same transaction), so it is never the outcome.
OUTCOME_STATUSES = FINAL_RUN_STATUSES - {RunStatus.RETRYING, RunStatus.INTERRUPTED}
RUN_RANGES = {
    "due": "due_at",
    "created": "created_at",
    "started": "started_at",
    "finished": "finished_at",
}


def run_list(
    *,
    task: str | None = None,
    status: list[str] | None = None,
    trigger: list[str] | None = None,
    action: str | None = None,
    requested_by: str | None = None,
    dead: bool = False,
    **ranges: datetime | None,
) -> QuerySet[Run]:
    """Runs, newest due first, filtered (each filter optional; ``ranges`` as in
    :data:`RUN_RANGES`). ``dead``: only runs that ended without success for good."""
    qs = run_list_dead() if dead else Run.objects.all()
    if task:
        qs = qs.filter(task_id=task)
    if status:
        qs = qs.filter(status__in=status)
    if trigger:
        qs = qs.filter(trigger__in=trigger)
    if action:  # the action each run was made with (its task's, for a run that recorded none)
        qs = qs.filter(Q(action=action) | Q(action="", task__action=action))
    if requested_by:
        qs = qs.filter(requested_by=requested_by)
    return in_ranges(qs, RUN_RANGES, ranges).select_related("task").order_by("-due_at", "-id")


def run_list_dead(*, task_id: str | None = None) -> QuerySet[Run]:
    """Dead runs: ``failed`` with their retries exhausted (a run only ends ``failed``, not
    ``retrying``, after its last attempt) or ``expired``, and not retried by hand since,
    newest first. A dead run stops being dead once a later attempt of it exists.
    """
    later_attempt = Run.objects.filter(
        Q(first_attempt_id=Coalesce(OuterRef("first_attempt_id"), OuterRef("id"))),
        attempt__gt=OuterRef("attempt"),
    )
    qs = Run.objects.filter(status__in=DEAD_STATUSES).filter(~Exists(later_attempt))
    if task_id is not None:
        qs = qs.filter(task_id=task_id)
    return qs.select_related("task").order_by("-finished_at", "-id")


def run_attempts(*, run: Run) -> QuerySet[Run]:
    """Every attempt of the run ``run`` belongs to (the first attempt and its retries), in
    order: one query, served by the primary key and the ``first_attempt`` index."""
    first = run.first_attempt_id or run.id
    return (
        Run.objects.filter(Q(pk=first) | Q(first_attempt_id=first))
        .select_related("task")
        .order_by("attempt")
    )


@dataclass(frozen=True)
class RunOutcome:
    """What any attempt's id answers for the run it belongs to: every attempt, in order, and
    the outcome once the latest attempt has ended with no attempt to follow."""

    attempts: tuple[Run, ...]

    @property
    def latest(self) -> Run:
        return self.attempts[-1]

    def current(self, run: Run) -> Run:
        """``run`` as read with its attempts, so that its status agrees with the outcome: a
        run read before them may have finished in between (``run`` itself once gone)."""
        return next((a for a in self.attempts if a.pk == run.pk), run)

    @property
    def status(self) -> str | None:
        """``completed``, ``failed``, ``expired``, ``cancelled`` or ``skipped``; ``None``
        while an attempt is still to come (waiting, running, or about to be retried)."""
        status = self.latest.status
        return status if status in OUTCOME_STATUSES else None


def run_outcome(*, run: Run) -> RunOutcome:
    """The outcome of the run ``run`` belongs to, read in one query whichever attempt
    ``run`` is (a run retried by hand later gets the new attempt's outcome).

    Raises ``Run.DoesNotExist`` when its attempts are gone (the task was deleted since
    ``run`` was read), so that a caller polling for the outcome does not wait for ever.
    """
    attempts = tuple(run_attempts(run=run))
    if not attempts:
        raise Run.DoesNotExist(f"run {run.id} no longer exists")
    return RunOutcome(attempts=attempts)


def tally_rows(*, since: datetime, until: datetime, edges: Sequence[float]) -> list[store.Tally]:
    """``(status, action, bucket, count, lateness_sum_ms)`` of runs finished in [since, until);
    ``bucket``: how many of ``edges`` (ms) the start lateness reaches, ``None`` unstarted."""
    return store.tally_finished_runs(since=since, until=until, edges=list(edges))


@dataclass
class RunTotals:
    """Finished runs ever counted (``services.run_tally``) plus those finished since its mark."""

    runs: dict[tuple[str, str], int] = field(default_factory=dict)  # (status, action) -> n
    lateness_buckets: list[int] = field(default_factory=list)  # per bucket, not cumulative
    lateness_count: int = 0
    lateness_sum_ms: float = 0.0


def run_tally_totals(*, through: datetime, edges: Sequence[float]) -> RunTotals:
    """The stored tally plus the runs finished at or after ``through`` (its mark): exact at
    every call, in time that depends on the runs of the last minutes, not on the history."""
    totals = RunTotals(lateness_buckets=[0] * (len(edges) + 1))
    for tally in RunTally.objects.all():
        key = (tally.status, tally.action)
        totals.runs[key] = totals.runs.get(key, 0) + tally.runs
        for i, n in enumerate(tally.lateness_buckets):
            totals.lateness_buckets[i] += n
        totals.lateness_count += tally.lateness_count
        totals.lateness_sum_ms += tally.lateness_sum_ms
    far_future = datetime.max.replace(tzinfo=UTC)
    for status, action, bucket, count, sum_ms in tally_rows(
        since=through, until=far_future, edges=edges
    ):
        totals.runs[(status, action)] = totals.runs.get((status, action), 0) + count
        if bucket is not None:
            totals.lateness_buckets[bucket] += count
            totals.lateness_count += count
            totals.lateness_sum_ms += float(sum_ms)
    return totals


def pending_fires_per_second(
    *, until: datetime, limit: int = FIRES_COUNTED
) -> list[store.PerSecond]:
    """Schedule fires recorded and not yet published (``pending``) due by ``until``, counted
    per second of their due time, in time order (read by beat to prepare a busy instant;
    through ``run_pending_due_idx``)."""
    return store.pending_fires_per_second(until=until, limit=limit)


def runs_held() -> list[tuple[str, str, int]]:
    """``(task id, reason, runs)`` of the runs held back by flow control (run_held_idx), by
    task: what the overview and ``/metrics`` show as held back, and why."""
    rows = (
        Run.objects.filter(status=RunStatus.PENDING)
        .exclude(held="")
        .values_list("task_id", "held")
        .annotate(n=Count("id"))
        .order_by("task_id", "held")
    )
    return [(task_id, reason, n) for task_id, reason, n in rows]
