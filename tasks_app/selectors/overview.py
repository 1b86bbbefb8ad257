"""Reads behind the admin overview page. No writes here.

Every figure is aggregated in SQL with a fixed number of queries over bounded windows (the
last hour or day of due instants, read through ``run_due_idx``; a task's runs through
``run_task_due_idx``), so the page costs the same with 100,000 runs or 20,000,000: counts by
status, runs per minute by status, start lateness percentiles per minute (Postgres'
``percentile_cont``), failing and paused tasks, paused queues with the runs waiting in each,
and missed-run alarms. Health comes from
``tasks_app.observability.health``, cached briefly so a busy page does not ping the broker on every load.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.cache import cache
from django.db.models import Count, F, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce, TruncMinute

from .. import selectors, store
from ..models import Run, RunStatus, Task, TaskState, TaskStatus
from ..observability import health
from ..runtime import clock
from ..runtime.cache_keys import cache_key

CHART_MINUTES = 60
LIST_LIMIT = 20
HEALTH_CACHED = "overview:health"  # under cache_keys.cache_key
HEALTH_CACHE_SECONDS = 10
SLOW_CHECKS = frozenset({"workers"})
# Statuses drawn in the runs-per-minute chart, bottom to top.
CHART_STATUSES = (
    RunStatus.COMPLETED,
    RunStatus.RUNNING,
    RunStatus.QUEUED,
    RunStatus.RETRYING,
    RunStatus.INTERRUPTED,
    RunStatus.FAILED,
    RunStatus.EXPIRED,
    RunStatus.CANCELLED,
    RunStatus.SKIPPED,
)


@dataclass(frozen=True)
class MinuteLateness:
    minute: datetime
    p50_ms: float
    p99_ms: float
    count: int


@dataclass
class Overview:
    now: datetime
    counts: dict[str, dict[str, int]]  # status -> {"hour": n, "day": n}
    per_minute: list[tuple[datetime, dict[str, int]]]
    lateness: list[MinuteLateness]
    failing: list[dict[str, Any]]
    paused: list[dict[str, Any]]
    paused_queues: list[selectors.QueueState]
    alarms: list[dict[str, Any]]
    held: list[tuple[str, str, int]] = field(default_factory=list)
    health: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def totals(self) -> dict[str, int]:
        return {
            "hour": sum(c["hour"] for c in self.counts.values()),
            "day": sum(c["day"] for c in self.counts.values()),
        }


def overview_get(*, now: datetime | None = None, with_health: bool = True) -> Overview:
    """Everything the overview page shows, in a fixed number of queries."""
    now = now or clock.now()
    return Overview(
        now=now,
        counts=run_counts(now=now),
        per_minute=runs_per_minute(now=now),
        lateness=lateness_per_minute(now=now),
        failing=failing_tasks(),
        paused=paused_tasks(),
        paused_queues=[q for q in selectors.queue_list() if q.paused],
        alarms=alarm_tasks(),
        held=selectors.runs_held(),
        health=health_get() if with_health else {},
    )


def run_counts(*, now: datetime) -> dict[str, dict[str, int]]:
    """Runs due in the last hour and the last day, by status (one query; naming every status
    and counting ``due_at`` lets Postgres count in ``run_status_due_idx`` alone: an index-only
    scan, no table rows read)."""
    hour_ago, day_ago = now - timedelta(hours=1), now - timedelta(days=1)
    rows = (
        Run.objects.filter(status__in=RunStatus.values, due_at__gt=day_ago, due_at__lte=now)
        .order_by()
        .values("status")
        .annotate(day=Count("due_at"), hour=Count("due_at", filter=Q(due_at__gt=hour_ago)))
    )
    counts = {s: {"hour": 0, "day": 0} for s in RunStatus.values}
    for row in rows:
        counts[row["status"]] = {"hour": row["hour"], "day": row["day"]}
    return counts


def _minutes(now: datetime) -> list[datetime]:
    last = now.replace(second=0, microsecond=0)
    return [last - timedelta(minutes=i) for i in range(CHART_MINUTES - 1, -1, -1)]


def runs_per_minute(*, now: datetime) -> list[tuple[datetime, dict[str, int]]]:
    """Runs by due minute and status over the last hour, every minute present (one query)."""
    minutes = _minutes(now)
    rows = (
        Run.objects.filter(status__in=RunStatus.values, due_at__gte=minutes[0], due_at__lte=now)
        .order_by()
        .annotate(minute=TruncMinute("due_at"))
        .values("minute", "status")
        .annotate(n=Count("due_at"))
    )
    table: dict[datetime, dict[str, int]] = defaultdict(dict)
    for row in rows:
        table[row["minute"]][row["status"]] = row["n"]
    return [(m, table.get(m, {})) for m in minutes]


def lateness_per_minute(*, now: datetime) -> list[MinuteLateness]:
    """Start lateness p50/p99 of the runs due in each minute of the last hour that have
    started (one query over the due-time index: by due minute, not start minute, so the
    window is an index range whatever the history holds)."""
    since = _minutes(now)[0]
    return [MinuteLateness(*m) for m in store.lateness_per_minute(since=since, until=now)]


def failing_tasks(*, limit: int = LIST_LIMIT) -> list[dict[str, Any]]:
    """Tasks whose latest run failed or that are failing in a row, worst first (one query).

    Each task's figures read its runs through ``run_task_due_idx`` within bounds: failures
    among the runs due in the last day, and the newest failed run (a failing task's latest
    runs failed, so the walk stops near the top) — never the task's whole history.
    """
    day_ago = clock.now() - timedelta(days=1)
    failed = Run.objects.filter(task_id=OuterRef("pk"), status=RunStatus.FAILED).order_by()
    return list(
        Task.objects.filter(
            Q(state__status=TaskStatus.FAILED) | Q(state__consecutive_failures__gt=0)
        )
        .annotate(
            failed_day=Coalesce(
                Subquery(
                    failed.filter(due_at__gte=day_ago)
                    .values("task_id")
                    .annotate(n=Count("*"))
                    .values("n")
                ),
                0,
            ),
            last_failure=Subquery(failed.order_by("-due_at").values("finished_at")[:1]),
        )
        .order_by("-state__consecutive_failures", "-last_failure", "id")
        .values(
            "id",
            "name",
            "action",
            "failed_day",
            "last_failure",
            status=F("state__status"),
            consecutive_failures=F("state__consecutive_failures"),
        )[:limit]
    )


def paused_tasks(*, limit: int = LIST_LIMIT) -> list[dict[str, Any]]:
    """Paused tasks, latest pause first: their state rows, where the pause lives, walked in
    the order of ``task_paused_idx``."""
    rows: Any = (
        TaskState.objects.filter(status=TaskStatus.PAUSED)
        .order_by("-paused_at", "task_id")
        .values(
            "pause_note",
            "paused_by",
            "paused_at",
            id=F("task_id"),
            name=F("task__name"),
        )[:limit]
    )
    return list(rows)


def alarm_tasks(*, limit: int = LIST_LIMIT) -> list[dict[str, Any]]:
    """Tasks with a raised missed-run alarm (``alarm_since`` set)."""
    rows: Any = (
        Task.objects.filter(state__alarm_since__isnull=False)
        .order_by("state__alarm_since", "id")
        .values(
            "id",
            "name",
            alarm_since=F("state__alarm_since"),
            alarm_note=F("state__alarm_note"),
            next_run_at=F("state__next_run_at"),
        )[:limit]
    )
    return list(rows)


# --- health --------------------------------------------------------------------------------


def health_cached() -> dict[str, dict[str, Any]] | None:
    """The last health result if still fresh; ``None`` means the page fetches it itself."""
    try:
        cached = cache.get(cache_key(HEALTH_CACHED))
    except Exception:  # the cache is down: let the page ask, the cache check will say so
        return None
    return dict(cached) if cached else None


def health_get(*, quick: bool = False) -> dict[str, dict[str, Any]]:
    """``{component: {"ok": bool, "detail": str, "ms": float}}`` for database, broker,
    cache, beat and workers, from ``tasks_app.observability.health`` (the checks behind /api/health);
    cached for ``HEALTH_CACHE_SECONDS`` since the broker and worker pings take time.

    ``quick`` leaves out the worker ping (it waits its whole timeout for replies), so the
    overview can show the other four at once, uncached, and fetch the workers' row after.
    """
    if quick:
        return {
            name: _health_row(name, check())
            for name, check in {**health.CHECKS, **health.ADVISORY}.items()
            if name not in SLOW_CHECKS
        }
    try:
        cached = cache.get(cache_key(HEALTH_CACHED))
    except Exception:  # the cache itself is down: check uncached, the cache check says so
        cached = None
    if cached:
        return dict(cached)
    result = {name: _health_row(name, check) for name, check in health.check_all().items()}
    try:
        cache.set(cache_key(HEALTH_CACHED), result, HEALTH_CACHE_SECONDS)
    except Exception:  # noqa: S110 - reported by the cache check itself
        pass
    return result


def _health_row(name: str, check: health.Check) -> dict[str, Any]:
    return {"ok": check.ok, "detail": _health_detail(check), "ms": check.latency_ms}


def _health_detail(check: health.Check) -> str:
    """A check in words: "last tick 2026-11-30 15:36:09 UTC, 0.8 s ago", "2 workers
    answered", "answered in 3.1 ms" (the raw fields stay in /api/health)."""
    if check.error:
        return check.error
    info = {k: v for k, v in check.info.items() if v is not None}
    parts = []
    if "last_tick" in info:
        tick = datetime.fromisoformat(info.pop("last_tick"))
        age = info.pop("age_seconds", None)
        ago = f", {age:.1f} s ago" if isinstance(age, int | float) else ""
        parts.append(f"last tick {tick.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC{ago}")
    if "processes" in info:
        n, bound = len(info.pop("processes")), info.pop("bound_seconds", 0)
        info.pop("skewed", None)
        parts.append(
            f"{n} process clock{'s' if n != 1 else ''} within {bound:g} s of the database's"
        )
    if "count" in info:
        n = info.pop("count")
        parts.append(f"{n} worker{'s' if n != 1 else ''} answered the ping")
    parts.extend(f"{k.replace('_', ' ')} {v}" for k, v in info.items())
    return ", ".join(parts) or f"answered in {check.latency_ms:.1f} ms"
