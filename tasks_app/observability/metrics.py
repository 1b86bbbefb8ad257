"""``/metrics`` in Prometheus text format, computed from the database at scrape time.

Web, worker and beat are separate processes (and may be many), so in-process counters would
each see a slice. Instead every figure is read at scrape time from the shared stores:

- ``tasks_runs_total{status,action}``: runs finished, by final status and action; a counter
  that only grows: finished runs are tallied once (``services.run_tally``), so neither
  retention nor deleting a task takes it back, and a scrape reads minutes of runs, not the
  history; ``status="cancelled"`` counts cancellations, of waiting and of running runs.
  ``tasks_runs_running``: runs running now; ``tasks_runs_cancelling``: those of them asked to
  stop, not ended yet (one that stays up is an action that ignores the request past
  ``TASKS_CANCEL_GRACE_SECONDS`` in a pool that cannot end it).
  ``tasks_runs_held{task,reason}``: runs held back by their task's flow control
  (``concurrency``, ``rate``; docs/flow-control.md).
- ``tasks_run_start_lateness_seconds``: histogram of ``started_at - due_at`` of finished runs
  (same tally).
- ``tasks_queue_depth{queue,status}``: runs waiting (``pending`` in the database,
  ``queued`` on the broker) per queue; ``tasks_broker_queue_messages{queue}`` is what the
  broker itself holds (``-1`` when it cannot be asked).
- ``tasks_beat_last_heartbeat_timestamp_seconds``: beat's last tick, from
  ``tasks_app.observability.health.last_beat_tick`` (beat writes it every tick);
  ``tasks_beat_tick_duration_seconds``: how long that tick took, written by beat through
  :func:`beat_tick_record` (cache key ``tasks:<digest>:beat:tick``, ``tasks_app.runtime.cache_keys``);
  ``tasks_clock_skew_seconds{process}``: each process's host clock minus the database's
  (``tasks_app.runtime.clock``; beat and workers record theirs in the cache, this process reads its
  own); ``tasks_cache_up``: 1, or 0 when the cache could not be reached (the scrape still answers
  200, those two unknown).
- ``tasks_queue_paused{queue}``: 1 while the queue is paused (docs/flow-control.md), else 0;
  ``tasks_queue_waiting_runs{queue}``: runs waiting on it (pending or queued), for every
  configured or paused queue (0 included).
- ``tasks_tasks{status}``, ``tasks_paused``, ``tasks_alarms``.
- ``tasks_unique_calls_total{outcome}``: unique calls (docs/flow-control.md) that got a
  waiting run instead of a new one (``deduplicated``) or replaced one (``replaced``),
  counted in the cache by the process that made the call (``services.unique_calls``);
  absent while the cache is unreachable, and back to 0 if the cache is emptied.

Access: a request carrying ``Authorization: Bearer <TASKS_METRICS_TOKEN>`` (when that setting
is non-empty), or one whose address lies in ``TASKS_METRICS_ALLOWED_NETWORKS`` (CIDRs, default
loopback only; the address is the client's as ``TASKS_TRUSTED_PROXIES`` lets it be known:
``tasks_app.runtime.client_address``). Anything else gets 401/403.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from collections.abc import Iterable, Iterator

from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from .. import selectors, services
from ..conf import app_settings, default_queue
from ..models import Run, RunStatus, TaskState, TaskStatus, run_queue
from ..runtime import clock
from ..runtime.client_address import client_ip
from ..services.unique_calls import counts as unique_call_counts
from ..vocabulary import validation
from . import health

# Beat records its tick's duration through health (a layer down); its names are kept here.
from .health import BEAT_TICK_DURATION as BEAT_TICK_DURATION
from .health import beat_tick_duration_get as beat_tick_duration_get
from .health import beat_tick_record as beat_tick_record

log = logging.getLogger(__name__)

# Start lateness buckets, in seconds.
LATENESS_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
)


# --- the collector ------------------------------------------------------------------------


class TasksCollector:
    """Reads the figures from Postgres, the cache and the broker when scraped."""

    def __init__(self, *, broker: bool = True) -> None:
        self.broker = broker

    def describe(self) -> Iterable[Metric]:
        return []  # no up-front description: the collector queries only when scraped

    def collect(self) -> Iterator[Metric]:
        yield from self._runs()
        yield from self._queues()
        yield from self._tasks()
        yield from self._beat()
        yield from self._unique_calls()

    def _unique_calls(self) -> Iterator[Metric]:
        try:
            counted = unique_call_counts()
        except Exception:
            log.warning("cache unreachable for the unique calls' counts", exc_info=True)
            return
        family = CounterMetricFamily(
            "tasks_unique_calls",
            "Calls with a unique key that got the waiting run with their key (deduplicated) "
            "or replaced it (replaced).",
            labels=["outcome"],
        )
        for outcome, n in counted.items():
            family.add_metric([outcome], n)
        yield family

    def _runs(self) -> Iterator[Metric]:
        edges = [b * 1000 for b in LATENESS_BUCKETS]
        through = services.run_tally_advance(now=clock.now(), edges=edges)
        totals = selectors.run_tally_totals(through=through, edges=edges)
        family = CounterMetricFamily(
            "tasks_runs", "Runs finished, by status and action.", labels=["status", "action"]
        )
        for (status, action), n in sorted(totals.runs.items()):
            family.add_metric([status, action], n)
        yield family
        running = GaugeMetricFamily("tasks_runs_running", "Runs running now.")
        running.add_metric([], Run.objects.filter(status=RunStatus.RUNNING).count())
        yield running
        cancelling = Run.objects.filter(status=RunStatus.RUNNING, cancel_requested_at__isnull=False)
        yield GaugeMetricFamily(
            "tasks_runs_cancelling",
            "Running runs a person asked to stop that have not ended yet.",
            value=cancelling.count(),
        )
        held = GaugeMetricFamily(
            "tasks_runs_held",
            "Runs due but held back by their task's flow control, by task and reason "
            "(concurrency: waiting for a slot; rate: waiting for their reserved start).",
            labels=["task", "reason"],
        )
        for task_id, reason, n in selectors.runs_held():
            held.add_metric([task_id, reason], n)
        yield held
        cumulative, buckets = 0, []
        for bound, n in zip(LATENESS_BUCKETS, totals.lateness_buckets, strict=False):
            cumulative += n
            buckets.append((repr(bound), cumulative))
        buckets.append(("+Inf", totals.lateness_count))
        yield HistogramMetricFamily(
            "tasks_run_start_lateness_seconds",
            "How late finished runs had started after their due instant.",
            buckets=buckets,
            sum_value=totals.lateness_sum_ms / 1000,
        )

    def _queues(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily(
            "tasks_queue_depth", "Runs waiting, by queue and status.", labels=["queue", "status"]
        )
        queues: set[str] = set()
        rows = (
            Run.objects.filter(status__in=[RunStatus.PENDING, RunStatus.QUEUED])
            .order_by()
            .values("status", on_queue=run_queue())
            .annotate(n=Count("id"))
        )
        waiting: dict[str, int] = {}
        for row in rows:
            queues.add(row["on_queue"])
            depth.add_metric([row["on_queue"], row["status"]], row["n"])
            waiting[row["on_queue"]] = waiting.get(row["on_queue"], 0) + row["n"]
        yield depth
        yield from self._pauses(waiting)
        if not self.broker:
            return
        queues.add(default_queue())
        broker = GaugeMetricFamily(
            "tasks_broker_queue_messages",
            "Messages the broker holds per queue (-1: the broker could not be asked).",
            labels=["queue"],
        )
        for name, count in _broker_depths(sorted(queues)).items():
            broker.add_metric([name], count)
        yield broker

    @staticmethod
    def _pauses(waiting: dict[str, int]) -> Iterator[Metric]:
        """``tasks_queue_paused{queue}`` (1 paused, 0 not) and
        ``tasks_queue_waiting_runs{queue}`` for each known queue (``selectors.queue_list``:
        the configured ones and any paused one), from the depth rows just read."""
        paused = GaugeMetricFamily(
            "tasks_queue_paused", "1 while the queue is paused, else 0.", labels=["queue"]
        )
        held = GaugeMetricFamily(
            "tasks_queue_waiting_runs",
            "Runs waiting on the queue (pending or queued), paused or not.",
            labels=["queue"],
        )
        pauses = selectors.paused_queues()
        for name in sorted(set(validation.configured_queues()) | pauses):
            paused.add_metric([name], 1 if name in pauses else 0)
            held.add_metric([name], waiting.get(name, 0))
        yield paused
        yield held

    def _tasks(self) -> Iterator[Metric]:
        tasks = GaugeMetricFamily("tasks_tasks", "Tasks by status.", labels=["status"])
        for row in TaskState.objects.order_by().values("status").annotate(n=Count("pk")):
            tasks.add_metric([row["status"]], row["n"])
        yield tasks
        # Each count through its partial index (task_paused_idx, task_in_alarm_idx), not
        # one pass over every task for both.
        paused = TaskState.objects.filter(status=TaskStatus.PAUSED).count()
        alarms = TaskState.objects.filter(alarm_since__isnull=False).count()
        yield GaugeMetricFamily("tasks_paused", "Paused tasks.", value=paused)
        yield GaugeMetricFamily(
            "tasks_alarms", "Tasks with a raised missed-run alarm.", value=alarms
        )

    def _beat(self) -> Iterator[Metric]:
        # Beat's figures live in the cache. A cache that cannot be reached is a figure of
        # its own (tasks_cache_up 0), as an exporter reports a dependency that is down, not
        # a failed scrape: the database's figures above still reach Prometheus.
        try:
            last = health.last_beat_tick()
            duration = beat_tick_duration_get()
            offsets = health.clock_offsets()
            up = 1
        except Exception:
            log.warning("cache unreachable for /metrics", exc_info=True)
            last, duration, offsets, up = None, None, {}, 0
        yield GaugeMetricFamily(
            "tasks_cache_up",
            "Whether the cache answered this scrape (0: unreachable; beat's figures unknown).",
            value=up,
        )
        yield GaugeMetricFamily(
            "tasks_beat_last_heartbeat_timestamp_seconds",
            "Unix time of beat's last tick (0: never seen, or the cache is unreachable).",
            value=last.timestamp() if last else 0,
        )
        yield GaugeMetricFamily(
            "tasks_beat_tick_duration_seconds",
            "How long beat's last tick took (firing schedules and releasing runs; -1: unknown).",
            value=duration if duration is not None else -1,
        )
        skew = GaugeMetricFamily(
            "tasks_clock_skew_seconds",
            "How far each process's host clock is ahead of the database's (negative: behind); "
            "the system keeps to the database's.",
            labels=["process"],
        )
        for name, seconds in sorted(offsets.items()):
            skew.add_metric([name], seconds)
        yield skew


def _broker_depths(queues: list[str]) -> dict[str, int]:
    """Message counts by passive ``queue_declare``; ``-1`` for a queue that cannot be read."""
    from celery import current_app

    out = dict.fromkeys(queues, -1)
    try:
        with current_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=1)
            for name in queues:
                channel = conn.channel()
                try:
                    out[name] = channel.queue_declare(queue=name, passive=True).message_count
                except Exception:  # noqa: S112 - an undeclared queue has no depth to report
                    continue
                finally:
                    try:
                        channel.close()
                    except Exception:  # noqa: S110
                        pass
    except Exception:
        log.warning("broker unreachable for queue depths", exc_info=True)
    return out


def metrics_text(*, broker: bool = True) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TasksCollector(broker=broker))  # type: ignore[arg-type]
    return generate_latest(registry)


# --- the view -----------------------------------------------------------------------------


def _allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    raw = app_settings.METRICS_ALLOWED_NETWORKS
    if isinstance(raw, str):
        raw = [part.strip() for part in raw.split(",") if part.strip()]
    return [ipaddress.ip_network(item, strict=False) for item in raw]


def metrics_allowed(request: HttpRequest) -> tuple[bool, int]:
    """(allowed, status when refused): bearer token or an allowed source network."""
    token = app_settings.METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer "):
        return hmac.compare_digest(header[7:].strip().encode(), token.encode()), 401
    try:
        address = ipaddress.ip_address(client_ip(request))
    except ValueError:
        return False, 401
    if any(address in net for net in _allowed_networks()):
        return True, 200
    return False, 401 if token else 403


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    allowed, status = metrics_allowed(request)
    if not allowed:
        response = HttpResponse("metrics: not allowed\n", status=status, content_type="text/plain")
        if status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(metrics_text(), content_type=CONTENT_TYPE_LATEST)
