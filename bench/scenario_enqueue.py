"""Scenario ``enqueue``: what one ``.enqueue()`` of a ``@task`` function costs the caller,
and what a batch of ``N`` calls costs, each beside its anchors measured in the same run.

**Per call**, each a call as a view makes it (autocommit: the call is its own transaction),
timed from the call to its return, after ``WARMUP`` calls of each side; per side the median
over the rounds of each round's median:

- ``ours``: ``bench.enqueue_functions.noop.enqueue(i)`` through ``CeleryRunBackend`` (the
  run written in one statement, its message published when the transaction commits, i.e.
  before the call returns under autocommit);
- ``floor``: what an enqueue cannot do without: one prepared one-row ``INSERT`` (autocommit)
  and one publish of the same kind of message on the same broker connection pool;
- ``celery_publish``: a bare ``send_task`` (Celery's ``.delay()`` without a task object), no
  database;
- ``tasks_db``: django-tasks-db 0.13's ``DatabaseBackend`` (one ``INSERT``; its worker polls
  the table, nothing is published), Python 3.11 / Django 5.2 on the django-tasks backport;
- ``ox``: django-ox 1.9's ``OxBackend`` (one ``INSERT``, polled likewise), Python 3.12 /
  Django 6.0.

``ours``, ``floor`` and ``celery_publish`` take turns in this process in chunks of
``CHUNK`` calls; the anchors run in processes of their own (``bench/anchors/anchor.py``, each
in its virtualenv under ``var/bench-anchors/`` and on a database of its own on the same
Postgres), one round of each after each of our rounds, chunked and warmed up the same way.

**Bulk** of ``N`` calls (100,000; ``--quick`` 10,000), each side timed from the call to its
return, after a warm-up batch of ``WARMUP`` calls, the sides' order rotating from round to
round; per side the median over the rounds:

- ``ours``: ``enqueue_many(noop, [((i,), {}) for i in range(N)])`` (autocommit: one
  statement writes the ``N`` runs, then the batch is published, confirmed by the broker,
  before the call returns); the runs queued and the messages in the queue are counted
  afterwards;
- ``floor``: one ``COPY`` of ``N`` rows, then ``N`` messages of the same kind published on
  one channel in confirm mode, every confirm drained, written as
  ``tasks_app.messaging.dispatch.BatchPublisher`` writes a batch of one shape (Celery builds the first
  message, the others are its frames with their own id);
- ``ox``: ``django_ox.bulk.enqueue_many`` of the same calls (``bulk_create`` in one
  transaction; it publishes nothing: the committed rows are its queue).

**End to end** (5,000 calls; ``--quick`` 500): a backlog of no-op calls enqueued before the
workers start, then drained by 2 worker processes; the rate ``(completed - 1) / (last start
- first start)`` as ``bench/execution.py`` reads ours; per side the median over the rounds:

- ``ours``: ``enqueue_many`` (written and published), then a Celery worker of 2 prefork
  processes (the project's delivery settings), every run's lifecycle recorded;
- ``tasks_db``: its ``enqueue`` in one transaction, then two ``db_worker`` processes;
- ``ox``: its ``enqueue_many``, then ``ox_worker --processes 2``; both anchors with their
  package defaults (one task at a time per process).

Apart from that end-to-end part, nothing consumes the messages: the bench queue is deleted
(and declared again, empty) and the tables emptied after each side's round. An anchor that
cannot be installed or run is ``null``, its reason under ``anchors``; our sides are
measured all the same (an error of the end-to-end part is ``throughput_error``, the rest
kept).

**``run_after`` lateness** (1,500 calls at 50 a second; ``--quick`` 300): each call
``noop.using(run_after=now + delay)``, the delays 1-60 s (``--quick`` 1-10 s) from one seeded
generator (``bench/anchors/pacing.py``), the same on both sides; lateness is the start of
the call's execution minus its ``run_after``, in milliseconds, p50/p99 over the calls:

- ``ours``: a Celery worker of 2 prefork processes and our beat (which releases a run due
  beyond the release horizon); lateness ``started_at - due_at`` as the worker's claim
  records it;
- ``ox``: ``ox_worker --processes 2`` with its defaults (it polls every second when idle);
  lateness ``started_at - run_after`` from its table.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import common

SIZES = {
    "full": {
        "calls": 200,
        "rounds": 5,
        "bulk": 100_000,
        "bulk_rounds": 3,
        "throughput": 5_000,
        "throughput_rounds": 3,
        "lateness_calls": 1_500,
        "lateness_max_delay": 60,
    },
    "quick": {
        "calls": 100,
        "rounds": 2,
        "bulk": 10_000,
        "bulk_rounds": 2,
        "throughput": 500,
        "throughput_rounds": 1,
        "lateness_calls": 300,
        "lateness_max_delay": 10,
    },
}
CHUNK = 20
WARMUP = 20
FLOOR_TABLE = "bench_enqueue_floor"
ANCHOR_SCRIPT = common.ROOT / "bench" / "anchors" / "anchor.py"
ANCHOR_NAMES = ("tasks_db", "ox")
TARGETS = {"ours_vs_floor": 1.5, "bulk_ours_vs_ox": 1.2}  # ours / anchor, at most
TARGETS_AT_LEAST = {"throughput_ours_vs_tasks_db": 1.0, "throughput_ours_vs_ox": 1.0}
TARGETS_LATENESS = {"p99_ours_vs_ox": 1.0}  # ours / ox, at most
WORKER_PROCESSES = 2
LATENESS_RATE = 50  # calls a second


# --- per call, in this process ------------------------------------------------------------


def _floor_connection() -> Any:
    import psycopg

    pg = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
    pg.execute(f"DROP TABLE IF EXISTS {FLOOR_TABLE}")
    pg.execute(f"CREATE TABLE {FLOOR_TABLE} (id bigserial PRIMARY KEY, args jsonb, at timestamptz)")
    return pg


def _sides() -> dict[str, Callable[[int], Any]]:
    from bench.enqueue_functions import noop
    from project.celery import app

    pg = _floor_connection()

    def floor(i: int) -> None:
        pg.execute(
            f"INSERT INTO {FLOOR_TABLE} (args, at) VALUES (%s, now())",
            [f"[{i}]"],
            prepare=True,
        )
        app.send_task("bench.noop", args=[i], queue=common.QUEUE)

    def celery_publish(i: int) -> None:
        app.send_task("bench.noop", args=[i], queue=common.QUEUE)

    return {"ours": lambda i: noop.enqueue(i), "floor": floor, "celery_publish": celery_publish}


def measure(calls: int) -> dict[str, float]:
    """Median milliseconds per call of each side, taking turns in chunks."""
    sides = _sides()
    for call in sides.values():
        for i in range(WARMUP):
            call(i)
    times: dict[str, list[float]] = {name: [] for name in sides}
    for start in range(0, calls, CHUNK):
        for name, call in sides.items():
            for i in range(start, min(start + CHUNK, calls)):
                began = time.perf_counter()
                call(i)
                times[name].append((time.perf_counter() - began) * 1000)
    return {name: round(statistics.median(values), 3) for name, values in times.items()}


# --- the anchors, each in its own process -------------------------------------------------


class Anchor:
    """One anchor's rounds, run by its virtualenv's Python; once one fails (or the
    virtualenv cannot be built) the anchor is unavailable for the rest of the run."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.python: Path | None = None
        self.unavailable: str | None = None
        self.versions: dict[str, str] | None = None
        self.database = f"{os.environ.get('BENCH_ANCHOR_DB_PREFIX', 'bench_anchor')}_{name}"

    def prepare(self) -> None:
        from bench.anchors import venvs

        try:
            self.python = venvs.ensure(self.name)
        except Exception as exc:  # AnchorUnavailable, or anything else on the way
            self.unavailable = f"its virtualenv could not be built: {exc}"

    def run(
        self, mode: str, *, calls: int = 0, timeout: float = 300, extra: tuple[str, ...] = ()
    ) -> dict[str, Any] | None:
        if self.unavailable or self.python is None:
            return None
        env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
        env |= {"ANCHOR_DATABASE_URL": os.environ["DATABASE_URL"], "ANCHOR_DB": self.database}
        args = [str(self.python), str(ANCHOR_SCRIPT), self.name, mode]
        args += ["--calls", str(calls), "--chunk", str(CHUNK), "--warmup", str(WARMUP), *extra]
        try:
            done = subprocess.run(
                args, cwd=common.ROOT, env=env, capture_output=True, text=True, timeout=timeout
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.unavailable = f"{mode} round: {exc}"
            return None
        lines = done.stdout.strip().splitlines()
        try:
            if done.returncode != 0 or not lines:
                raise ValueError(f"exit status {done.returncode}")
            result: dict[str, Any] = json.loads(lines[-1])
        except ValueError as exc:
            tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            self.unavailable = f"{mode} round failed ({exc}): {tail}"[:1000]
            return None
        self.versions = result.get("versions")
        return result

    def describe(self) -> dict[str, Any]:
        return {
            "versions": self.versions,
            "database": self.database,
            "python": str(self.python) if self.python else None,
            "unavailable": self.unavailable,
        }


# --- bulk ---------------------------------------------------------------------------------


def queued_messages() -> int:
    """Messages now in the bench queue (0 when it does not exist)."""
    from project.celery import app

    with app.connection_for_write() as conn:
        try:
            return int(conn.default_channel.queue_declare(common.QUEUE, passive=True)[1])
        except Exception:  # not declared
            return 0


def _settle_count(expected: int, timeout: float = 10) -> int:
    """The queue's message count once it reaches ``expected`` (or after ``timeout``): the
    broker may count a confirmed message a moment later."""
    common.wait_until(lambda: queued_messages() >= expected, timeout=timeout, interval=0.1)
    return queued_messages()


def bulk_ours(n: int) -> dict[str, Any]:
    from bench.enqueue_functions import noop
    from tasks_app.django_tasks import enqueue_many
    from tasks_app.models import Run

    enqueue_many(noop, [((i,), {}) for i in range(WARMUP)])
    calls = [((i,), {}) for i in range(n)]
    began = time.perf_counter()
    results = enqueue_many(noop, calls)
    seconds = time.perf_counter() - began
    return {
        "bulk_s": round(seconds, 3),
        "results": len(results),
        "runs_queued": Run.objects.filter(status="queued").count() - WARMUP,
        "published": _settle_count(n + WARMUP) - WARMUP,
    }


class FloorBulk:
    """One ``COPY`` of the rows, then the messages on one channel in confirm mode."""

    def __init__(self) -> None:
        from project.celery import app

        self.app = app
        self.pg = _floor_connection()
        options = dict(app.conf.broker_transport_options or {})
        options["confirm_publish"] = False  # confirms are drained as a batch here
        self.conn = app.connection_for_write(transport_options=options)
        self.conn.ensure_connection(max_retries=1)
        self.channel = self.conn.default_channel
        self.channel.confirm_select()
        self.channel.events["basic_ack"].add(self._on_ack)
        self.producer = app.amqp.Producer(self.channel)
        self.route = app.amqp.router.route({"queue": common.QUEUE}, "bench.noop")
        self.tag = 0  # the last delivery tag published
        self.upto = 0  # every tag up to this one is confirmed
        self.single: set[int] = set()  # confirmed one by one, above ``upto``

    def _on_ack(self, tag: int, multiple: bool) -> None:
        if multiple:
            self.upto = max(self.upto, tag)
            self.single = {t for t in self.single if t > self.upto}
        elif tag > self.upto:
            self.single.add(tag)

    def __call__(self, n: int) -> None:
        from tasks_app.messaging.dispatch import MessageFrames

        amqp, now = self.app.amqp, datetime.now(UTC)
        with self.pg.cursor() as cur, cur.copy(f"COPY {FLOOR_TABLE} (args, at) FROM STDIN") as copy:
            for i in range(n):
                copy.write_row((f"[{i}]", now))
        # Celery builds the first message; the others are its frames with their own id, as
        # tasks_app.messaging.dispatch.BatchPublisher writes a batch of one shape.
        frames, shape = MessageFrames(self.producer, lean=True), ("floor",)
        for i in range(n):
            task_id = str(uuid.uuid4())
            if frames.copy(shape, task_id):
                continue
            message = amqp.create_task_message(
                task_id,
                "bench.noop",
                [i],
                reply_to=self.app.thread_oid,
                create_sent_event=self.app.conf.task_send_sent_event,
            )
            with frames.recording(shape, task_id):
                amqp.send_task_message(
                    self.producer, "bench.noop", message, **self.route, retry=False
                )
        frames.flush()
        self.tag += n
        deadline = time.monotonic() + 60
        while self.upto + len(self.single) < self.tag and time.monotonic() < deadline:
            self.conn.drain_events(timeout=max(deadline - time.monotonic(), 0.01))
        if self.upto + len(self.single) < self.tag:
            raise RuntimeError(f"floor: {self.tag - self.upto - len(self.single)} unconfirmed")

    def close(self) -> None:
        self.conn.release()
        self.pg.close()


def bulk_floor(n: int) -> dict[str, Any]:
    floor = FloorBulk()
    try:
        floor(WARMUP)
        began = time.perf_counter()
        floor(n)
        seconds = time.perf_counter() - began
        rows = floor.pg.execute(f"SELECT count(*) FROM {FLOOR_TABLE}").fetchone()[0]
    finally:
        floor.close()
    return {
        "bulk_s": round(seconds, 3),
        "rows_written": int(rows) - WARMUP,
        "published": _settle_count(n + WARMUP) - WARMUP,
    }


# --- end to end: a backlog of no-op calls drained by 2 worker processes ---------------------


def throughput_ours(n: int) -> dict[str, Any]:
    """``n`` calls enqueued (``enqueue_many``: written and published) before the worker
    starts, then a Celery worker of 2 prefork processes (the project's delivery settings)
    until every run has ended; the rate as ``bench/execution.py`` reads it:
    ``(completed - 1) / (last start - first start)``."""
    from django.db.models import Max, Min

    from bench.enqueue_functions import noop
    from tasks_app.django_tasks import enqueue_many
    from tasks_app.models import Run
    from tasks_app.vocabulary.choices import RunStatus

    enqueue_many(noop, [((i,), {}) for i in range(n)])
    ended = Run.objects.filter(status__in=[RunStatus.COMPLETED, RunStatus.FAILED])
    with common.processes() as procs:
        procs.append(common.start_worker(concurrency=WORKER_PROCESSES, shape="installed"))
        common.wait_until(lambda: ended.count() >= n, timeout=600, interval=0.5)
    done = Run.objects.filter(status=RunStatus.COMPLETED)
    completed = done.count()
    span = done.aggregate(first=Min("started_at"), last=Max("started_at"))
    seconds = (span["last"] - span["first"]).total_seconds() if span["first"] else 0
    out: dict[str, Any] = {
        "runs": n,
        "completed": completed,
        "settled": ended.count(),
        "span_s": round(seconds, 2),
        "tasks_per_s": round((completed - 1) / seconds, 1) if seconds else None,
        "workers": [f"celery worker --pool prefork --concurrency {WORKER_PROCESSES}"],
    }
    if out["settled"] < n:
        out["not_settled_in_time"] = True
    return out


def _throughput(
    anchors: dict[str, Anchor], n: int, rounds: int
) -> tuple[dict[str, float | None], list[dict[str, Any]]]:
    sides: dict[str, Callable[[], dict[str, Any] | None]] = {
        "ours": lambda: throughput_ours(n),
        **{
            name: (
                lambda anchor=anchor: anchor.run(
                    "throughput",
                    calls=n,
                    timeout=900,
                    extra=("--processes", str(WORKER_PROCESSES), "--timeout", "600"),
                )
            )
            for name, anchor in anchors.items()
        },
    }
    order, results = list(sides), []
    for index in range(rounds):
        this: dict[str, Any] = {}
        for name in order[index % len(order) :] + order[: index % len(order)]:
            _clean()
            this[name] = sides[name]()
            _clean()
        results.append(this)
    rates = {
        name: None
        if name in anchors and anchors[name].unavailable
        else _median([(r[name] or {}).get("tasks_per_s") for r in results])
        for name in sides
    }
    return rates, results


def _clean() -> None:
    """Tables emptied, the bench queue deleted and declared again, empty. Declared again:
    a connection that declared it once (the pool's, ours' batch publisher's) remembers that
    and does not declare it again, so its messages would go to no queue at all."""
    from project.celery import app

    common.reset_tables()
    common.delete_queues(common.QUEUE)
    with app.connection_for_write() as conn:
        app.amqp.queues[common.QUEUE](conn.default_channel).declare()


# --- run_after lateness at 50 calls a second -----------------------------------------------


def lateness_ours(calls: int, max_delay: float) -> dict[str, Any]:
    """A Celery worker of 2 prefork processes and our beat started, then ``calls`` calls of
    ``noop.using(run_after=now + delay)`` at ``LATENESS_RATE`` a second (``pacing.arrive``:
    the delays django-ox gets); once they have ended, each run's lateness ``started_at -
    due_at`` in milliseconds (its due time is the call's ``run_after``)."""
    from datetime import timedelta

    from django.utils import timezone

    from bench.anchors import pacing
    from bench.enqueue_functions import noop
    from tasks_app.models import Run
    from tasks_app.vocabulary.choices import RunStatus

    def emit(i: int, delay: float) -> None:
        noop.using(run_after=timezone.now() + timedelta(seconds=delay)).enqueue(i)

    ended = Run.objects.filter(status__in=[RunStatus.COMPLETED, RunStatus.FAILED])
    with common.processes() as procs:
        procs.append(common.start_worker(concurrency=WORKER_PROCESSES, shape="installed"))
        procs.append(common.start_beat(shape="installed"))
        pacing.arrive(calls, rate=LATENESS_RATE, max_delay=max_delay, emit=emit)
        common.wait_until(lambda: ended.count() >= calls, timeout=max_delay + 120, interval=0.5)
    done = Run.objects.filter(status=RunStatus.COMPLETED)
    late_ms = [
        (started - due).total_seconds() * 1000
        for started, due in done.values_list("started_at", "due_at")
    ]
    out: dict[str, Any] = {
        "runs": calls,
        "settled": ended.count(),
        "late_ms": [round(v, 1) for v in late_ms],
        "workers": [f"celery worker --pool prefork --concurrency {WORKER_PROCESSES}", "beat"],
    }
    if out["settled"] < calls:
        out["not_settled_in_time"] = True
    return out


def _lateness(anchor: Anchor, calls: int, max_delay: float) -> dict[str, Any]:
    """Ours, then django-ox's, each side's percentiles of lateness (ms) over its calls."""
    _clean()
    sides: dict[str, dict[str, Any] | None] = {"ours": lateness_ours(calls, max_delay)}
    _clean()
    sides["ox"] = anchor.run(
        "lateness",
        calls=calls,
        timeout=max_delay + 600,
        extra=(
            "--processes",
            str(WORKER_PROCESSES),
            "--rate",
            str(LATENESS_RATE),
            "--max-delay",
            str(max_delay),
            "--timeout",
            str(max_delay + 120),
        ),
    )
    out: dict[str, Any] = {}
    for name, got in sides.items():
        if got is None:
            out[name] = None
            continue
        late = got.pop("late_ms")
        out[name] = {**got, "late_ms": common.percentiles(late)}
    return out


# --- the scenario -------------------------------------------------------------------------


def _median(values: list[float | None]) -> float | None:
    return round(statistics.median(values), 3) if values and None not in values else None


def run(results_dir: Path, *, quick: bool = False) -> dict[str, Any]:
    size = SIZES["quick" if quick else "full"]
    anchors = {name: Anchor(name) for name in ANCHOR_NAMES}
    for anchor in anchors.values():
        anchor.prepare()

    _clean()
    rounds: list[dict[str, float | None]] = []
    in_queue = []  # per round: the messages of our three sides, all of them in the queue?
    for _ in range(size["rounds"]):
        this: dict[str, float | None] = dict(measure(size["calls"]))
        in_queue.append(_settle_count(3 * (size["calls"] + WARMUP)))
        _clean()
        for name, anchor in anchors.items():
            got = anchor.run("per_call", calls=size["calls"])
            this[name] = got["per_call_ms"] if got else None
        rounds.append(this)
    sides = [*rounds[0]]
    per_call = {
        name: None
        if name in anchors and anchors[name].unavailable
        else _median([r[name] for r in rounds])
        for name in sides
    }

    n = size["bulk"]
    bulk_sides: dict[str, Callable[[], dict[str, Any] | None]] = {
        "ours": lambda: bulk_ours(n),
        "floor": lambda: bulk_floor(n),
        "ox": lambda: anchors["ox"].run("bulk", calls=n, timeout=900),
    }
    bulk_rounds: list[dict[str, Any]] = []
    order = list(bulk_sides)
    for index in range(size["bulk_rounds"]):
        this_bulk: dict[str, Any] = {}
        for name in order[index % 3 :] + order[: index % 3]:
            _clean()
            this_bulk[name] = bulk_sides[name]()
            _clean()
        bulk_rounds.append(this_bulk)
    bulk_s = {
        name: None
        if name in anchors and anchors[name].unavailable
        else _median([(r[name] or {}).get("bulk_s") for r in bulk_rounds])
        for name in bulk_sides
    }
    try:
        per_s, throughput_rounds = _throughput(
            anchors, size["throughput"], size["throughput_rounds"]
        )
        throughput_error = None
    except Exception as exc:  # the per-call and bulk figures above stand on their own
        per_s, throughput_rounds = {"ours": None, "tasks_db": None, "ox": None}, []
        throughput_error = f"{type(exc).__name__}: {exc}"[:2000]
        _clean()
    try:
        late = _lateness(anchors["ox"], size["lateness_calls"], size["lateness_max_delay"])
        lateness_error = None
    except Exception as exc:  # the figures above stand on their own
        late, lateness_error = {"ours": None, "ox": None}, f"{type(exc).__name__}: {exc}"[:2000]
        _clean()
    for anchor in anchors.values():
        anchor.run("reset")  # leave no 100,000 rows behind in its database
    p99 = {name: (side or {}).get("late_ms", {}).get("p99") for name, side in late.items()}

    ours = per_call["ours"]
    return {
        "scenario": "enqueue",
        "inputs": {
            "calls": size["calls"],
            "rounds": size["rounds"],
            "chunk": CHUNK,
            "warmup": WARMUP,
            "bulk_calls": n,
            "bulk_rounds": size["bulk_rounds"],
            "throughput_calls": size["throughput"],
            "throughput_rounds": size["throughput_rounds"],
            "worker_processes": WORKER_PROCESSES,
            "lateness_calls": size["lateness_calls"],
            "lateness_rate": LATENESS_RATE,
            "lateness_max_delay_s": size["lateness_max_delay"],
        },
        "per_call_ms": per_call,
        "bulk_s": bulk_s,
        "throughput_tasks_per_s": per_s,
        "lateness": late,
        "ratios": {
            "ours_vs_floor": common.ratio(ours, per_call["floor"]),
            "ours_vs_celery_publish": common.ratio(ours, per_call["celery_publish"]),
            "ours_vs_tasks_db": common.ratio(ours, per_call["tasks_db"]),
            "ours_vs_ox": common.ratio(ours, per_call["ox"]),
            "bulk_ours_vs_ox": common.ratio(bulk_s["ours"], bulk_s["ox"]),
            "bulk_ours_vs_floor": common.ratio(bulk_s["ours"], bulk_s["floor"]),
            "throughput_ours_vs_tasks_db": common.ratio(per_s["ours"], per_s["tasks_db"]),
            "throughput_ours_vs_ox": common.ratio(per_s["ours"], per_s["ox"]),
            "p99_ours_vs_ox": common.ratio(p99["ours"], p99["ox"]),
        },
        "targets": TARGETS,
        "targets_at_least": TARGETS_AT_LEAST,
        "targets_lateness": TARGETS_LATENESS,
        "throughput_error": throughput_error,
        "lateness_error": lateness_error,
        "anchors": {name: anchor.describe() for name, anchor in anchors.items()},
        "settings": "autocommit, same Postgres and RabbitMQ; per call: call to return, median "
        "over rounds of each side's median, ours/floor/celery_publish in this process in "
        "chunks, each anchor in its own process after each of our rounds; bulk: call to "
        "return (ours and floor: every message published and confirmed; ox: rows committed, "
        "nothing published), median over rounds; throughput: a backlog of no-op calls "
        "drained by 2 worker processes, (completed - 1) / (last start - first start), "
        "median over rounds; lateness: start minus run_after of calls at 50/s with seeded "
        "delays, one round per side, percentiles over the calls",
        "checks": {
            "per_call_messages_in_queue": in_queue,
            "per_call_messages_expected": 3 * (size["calls"] + WARMUP),
        },
        "rounds": rounds,
        "bulk_rounds": bulk_rounds,
        "throughput_rounds": throughput_rounds,
    }
