"""Beat with many stored schedules: ``make bench BENCH_ARGS="beat_scale [--quick]"``.

Ours (``TaskScheduler``) at N = 1,000 and 1,000,000 stored schedules (``--quick``: 1,000
and 100,000), with the same due load at every size: ``DUE`` interval schedules every 10 s
(their fires spread evenly over the period); the other N − ``DUE`` are not due during the
measurement (half interval schedules every 2 to 24 h, half daily cron schedules in four time
zones, each next fire at least an hour ahead). Every recurring task owns its
django-celery-beat ``PeriodicTask`` with its ``IntervalSchedule`` / ``CrontabSchedule``, as
the services write them: two template tasks are created through ``services.task_create``
and their rows (task, beat entry) are cloned with ``INSERT ... SELECT generate_series``, each
clone with its own id, schedule, beat entry and planned next fire.

For each N, one beat process (a consumer takes the queue's messages as they arrive):

1. **start-up** — process spawn to the end of its first leader pass (the log line
   ``beat leading: first pass done``). Target ≤ 5 s.
2. **memory** — the process's RSS a minute after spawn, at N vs at 1,000. Target ≤ 1.2×.
3. **tick cost** — each leader pass's duration (``tick_ms`` of ``beat tick:`` lines, the
   figure ``metrics.beat_tick_record`` stores), at N vs at 1,000: it must not grow with the
   schedules that are not due.
4. **in the broker in time** — a due fire counts as in time when its message reached the
   broker no later than 1 s after its instant (``beat_throughput``'s consumer and rule).

Also: the start-up's read of the beat entries that are not owned by a task (the stock path's
``enabled_models_qs``), timed alone at each N.

The anchor, in the same run: stock django-celery-beat ``DatabaseScheduler`` on hand-made
``PeriodicTask`` entries of the same shape (``DUE`` every 10 s, the others not due; plus one
entry overdue at start, whose send marks its first tick), at 1,000, 10,000 and 100,000
entries (``--quick``: 1,000 and 10,000), each given ``STOCK_TIMEOUT_S`` to tick: its start-up
(spawn to that first send), its RSS a minute after spawn, and whether it ticked; the sizes
stop at the first it does not manage. Results: ``bench/results/beat_scale.json``.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import common
from bench.beat_throughput import in_time, owned_fires, receipts, start_consumer

SIZES = {
    "full": {"schedules": [1_000, 1_000_000], "stock": [1_000, 10_000, 100_000]},
    "quick": {"schedules": [1_000, 100_000], "stock": [1_000, 10_000]},
}
DUE = 1_000  # schedules every EVERY_S seconds: the due load, the same at every size
EVERY_S = 10
RUN_S = 60  # each beat runs this long after spawn; RSS is read at its end
LEAD_S = 15  # the first due fire, after spawn
SETTLE_S = 6
STOCK_TIMEOUT_S = 120
STOCK_QUEUE = "bench-stock-scale"
ZONES = ("UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo")
FIRST_PASS = "beat leading: first pass done"
STOCK_FIRST = "Sending due task stock-first"


def _window() -> dict[str, int]:
    """The due load as ``beat_throughput.in_time`` reads it."""
    return {"schedules": DUE, "every_s": EVERY_S, "duration_s": RUN_S - LEAD_S}


def reset() -> None:
    from django.db import connection

    common.reset_tables()
    with connection.cursor() as cur:
        cur.execute("TRUNCATE django_celery_beat_crontabschedule CASCADE")


# --- seeding ------------------------------------------------------------------------------


def _cron_keys(now: datetime, count: int) -> list[tuple[int, str, str, int, datetime]]:
    """Up to ``count`` daily cron schedules ``m h * * *`` (one a minute, in the four zones)
    whose next fire is at least an hour ahead: (index, cron, zone, crontab id, next fire).
    Crontab rows as ``sync_periodic_task`` writes them, one per schedule (at least one)."""
    from django_celery_beat.models import CrontabSchedule

    from tasks_app.models import Task
    from tasks_app.timing.task_schedule import first_fire

    keys = []
    for zone in ZONES:
        for hour in range(24):
            for minute in range(60):
                cron = f"{minute} {hour} * * *"
                task = Task(schedule_type="cron", cron=cron, timezone=zone)
                nxt = first_fire(task, now=now)
                if nxt is not None and nxt >= now + timedelta(hours=1):
                    keys.append((minute, hour, zone, cron, nxt))
    keys = keys[: max(count, 1)]
    rows = CrontabSchedule.objects.bulk_create(
        [
            CrontabSchedule(
                minute=str(m),
                hour=str(h),
                day_of_month="*",
                month_of_year="*",
                day_of_week="*",
                timezone=z,
            )
            for m, h, z, _, _ in keys
        ]
    )
    return [
        (i, k[3], k[2], row.pk, k[4]) for i, (k, row) in enumerate(zip(keys, rows, strict=True))
    ]


def _cron_count(count: int) -> int:
    """How many cron schedules a seed of ``count`` holds (half of those not due)."""
    return max(count - DUE, 0) // 2


def _intervals() -> list[tuple[int, int, int]]:
    """Interval schedules every 2 to 24 h: (index, seconds, IntervalSchedule id)."""
    from django_celery_beat.models import IntervalSchedule

    out = []
    for i, every in enumerate(range(7200, 86401, 3600)):
        row, _ = IntervalSchedule.objects.get_or_create(
            every=every, period=IntervalSchedule.SECONDS
        )
        out.append((i, every, row.pk))
    return out


def _columns(model: Any) -> list[str]:
    return [f.column for f in model._meta.concrete_fields]


def seed_owned(count: int, first_at: float) -> float:
    """``count`` recurring tasks owning their beat entries (see module doc); seconds taken."""
    from django.db import connection
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    from tasks_app import services
    from tasks_app.models import Task, TaskState

    started = time.monotonic()
    now = datetime.now(UTC)
    templates = {
        "interval": services.task_create(
            id="scale-template-interval",
            action="noop",
            queue=common.QUEUE,
            schedule_type="interval",
            interval_seconds=EVERY_S,
        ),
        "cron": services.task_create(
            id="scale-template-cron",
            action="noop",
            queue=common.QUEUE,
            schedule_type="cron",
            cron="0 3 * * *",
            timezone="UTC",
        ),
    }
    due_interval = IntervalSchedule.objects.get(every=EVERY_S, period=IntervalSchedule.SECONDS)
    crons, intervals = _cron_keys(now, _cron_count(count)), _intervals()
    with connection.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS scale_cron, scale_interval, scale_seed")
        cur.execute(
            "CREATE TEMP TABLE scale_cron (k int, cron text, zone text, crontab_id int, "
            "next_run timestamptz)"
        )
        cur.executemany("INSERT INTO scale_cron VALUES (%s, %s, %s, %s, %s)", crons)
        cur.execute("CREATE TEMP TABLE scale_interval (k int, every int, interval_id int)")
        cur.executemany("INSERT INTO scale_interval VALUES (%s, %s, %s)", intervals)
        periodic_seq = "pg_get_serial_sequence('django_celery_beat_periodictask', 'id')"
        cur.execute(
            f"""
            CREATE TEMP TABLE scale_seed AS
            SELECT s.g, s.kind, s.id, nextval({periodic_seq}) AS pt_id,
                   CASE s.kind WHEN 'due' THEN %(every)s ELSE i.every END AS every,
                   CASE s.kind WHEN 'due' THEN %(due_interval)s ELSE i.interval_id END
                       AS interval_id,
                   c.crontab_id, c.cron, c.zone,
                   CASE s.kind
                       WHEN 'due' THEN %(first)s
                           + make_interval(secs => %(every)s * s.g / %(due)s::float)
                       WHEN 'interval' THEN %(now)s
                           + make_interval(secs => 3600 + (s.g::bigint * 7919) %% (i.every - 3600))
                       ELSE c.next_run END AS next_run
              FROM (SELECT g, CASE WHEN g < %(due)s THEN 'due'
                                   WHEN g %% 2 = 1 THEN 'interval' ELSE 'cron' END AS kind,
                           'scale-' || lpad(g::text, 7, '0') AS id
                      FROM generate_series(0, %(count)s - 1) AS g) AS s
              LEFT JOIN scale_interval AS i
                ON s.kind = 'interval' AND i.k = s.g %% %(n_intervals)s
              LEFT JOIN scale_cron AS c ON s.kind = 'cron' AND c.k = (s.g / 2) %% %(n_crons)s
            """,
            {
                "every": EVERY_S,
                "due_interval": due_interval.pk,
                "first": datetime.fromtimestamp(first_at, UTC),
                "now": now,
                "due": DUE,
                "count": count,
                "n_intervals": len(intervals),
                "n_crons": len(crons),
            },
        )
        # The state rows are inserted as planning leaves them: the task insert trigger (which
        # inserts each unplanned, for an update to plan) is off while the clones go in.
        task_table, state = Task._meta.db_table, TaskState._meta.db_table
        cur.execute(f"ALTER TABLE {task_table} DISABLE TRIGGER tasks_app_task_state")
        try:
            for kind, template in templates.items():
                _clone_periodic(cur, template.periodic_task_id, kinds=_kinds(kind))
                _clone_task(cur, template.pk, kinds=_kinds(kind))
        finally:
            cur.execute(f"ALTER TABLE {task_table} ENABLE TRIGGER tasks_app_task_state")
        cur.execute(
            f"""INSERT INTO {state} (task_id, status, next_run_at, consecutive_failures,
                    fire_count)
                SELECT id, 'pending', next_run, 0, 0 FROM scale_seed"""
        )
        cur.execute("DROP TABLE scale_cron, scale_interval, scale_seed")
    periodic_ids = [t.periodic_task_id for t in templates.values()]
    Task.objects.filter(pk__in=[t.pk for t in templates.values()]).delete()
    PeriodicTask.objects.filter(pk__in=periodic_ids).delete()
    common.settle_after_bulk_load()
    with connection.cursor() as cur:
        cur.execute("VACUUM (ANALYZE) django_celery_beat_periodictask")
        cur.execute("VACUUM (ANALYZE) tasks_app_taskstate")
    return round(time.monotonic() - started, 1)


def _kinds(template: str) -> tuple[str, ...]:
    return ("due", "interval") if template == "interval" else ("cron",)


def _clone_periodic(cur: Any, template_id: int, *, kinds: tuple[str, ...]) -> None:
    from django_celery_beat.models import PeriodicTask

    overrides = {
        "id": "s.pt_id",
        "name": "'task:' || s.id",
        "kwargs": """'{"task_id": "' || s.id || '"}'""",
        "description": "'Owned by task ' || s.id || '; edit the task, not this entry.'",
        "interval_id": "s.interval_id",
        "crontab_id": "s.crontab_id",
    }
    _clone(cur, PeriodicTask, overrides, template_id, kinds)


def _clone_task(cur: Any, template_id: str, *, kinds: tuple[str, ...]) -> None:
    from tasks_app.models import Task

    overrides = {
        "id": "s.id",
        "name": "s.id",
        "interval_seconds": "s.every",
        "cron": "COALESCE(s.cron, t.cron)",
        "timezone": "COALESCE(s.zone, t.timezone)",
        "periodic_task_id": "s.pt_id",
    }
    _clone(cur, Task, overrides, template_id, kinds)


def _clone(
    cur: Any, model: Any, overrides: dict[str, str], template_id: Any, kinds: tuple[str, ...]
) -> None:
    columns = _columns(model)
    table = model._meta.db_table
    values = ", ".join(overrides.get(c, f"t.{c}") for c in columns)
    cur.execute(
        f"INSERT INTO {table} ({', '.join(columns)}) SELECT {values} "  # noqa: S608
        f"FROM {table} AS t, scale_seed AS s WHERE t.id = %s AND s.kind = ANY(%s)",
        [template_id, list(kinds)],
    )


def seed_stock(count: int, first_at: float) -> float:
    """``count`` hand-made entries of the same shape as ours, plus ``stock-first``."""
    from django.db import connection
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    started = time.monotonic()
    now = datetime.now(UTC)
    due_interval, _ = IntervalSchedule.objects.get_or_create(
        every=EVERY_S, period=IntervalSchedule.SECONDS
    )
    template = PeriodicTask.objects.create(
        name="stock-first",
        task="bench.stamp",
        args="[-1]",
        interval=due_interval,
        queue=STOCK_QUEUE,
        last_run_at=now - timedelta(hours=1),  # overdue: sent on the first tick
    )
    crons, intervals = _cron_keys(now, _cron_count(count)), _intervals()
    with connection.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS scale_cron, scale_interval")
        cur.execute("CREATE TEMP TABLE scale_cron (k int, crontab_id int)")
        cur.executemany("INSERT INTO scale_cron VALUES (%s, %s)", [(c[0], c[3]) for c in crons])
        cur.execute("CREATE TEMP TABLE scale_interval (k int, every int, interval_id int)")
        cur.executemany("INSERT INTO scale_interval VALUES (%s, %s, %s)", intervals)
        columns = [c for c in _columns(PeriodicTask) if c != "id"]
        overrides = {
            "name": "'stock-' || lpad(s.g::text, 7, '0')",
            "args": "'[' || s.g || ']'",
            "interval_id": "CASE WHEN s.kind = 'cron' THEN NULL "
            "WHEN s.kind = 'due' THEN t.interval_id ELSE i.interval_id END",
            "crontab_id": "c.crontab_id",
            # Stock computes the next send from last_run_at: due entries first due at
            # first_at + spread; the others an hour or more ahead.
            "last_run_at": """CASE s.kind
                WHEN 'due' THEN %(first)s
                    + make_interval(secs => %(every)s * s.g / %(due)s::float - %(every)s)
                WHEN 'interval' THEN %(now)s
                    + make_interval(secs => 3600 + (s.g::bigint * 7919) %% (i.every - 3600) - i.every)
                ELSE %(now)s END""",
        }
        values = ", ".join(overrides.get(c, f"t.{c}") for c in columns)
        table = PeriodicTask._meta.db_table
        cur.execute(
            f"""INSERT INTO {table} ({", ".join(columns)})
                SELECT {values}
                  FROM {table} AS t,
                       (SELECT g, CASE WHEN g < %(due)s THEN 'due'
                                       WHEN g %% 2 = 1 THEN 'interval' ELSE 'cron' END AS kind
                          FROM generate_series(0, %(count)s - 1) AS g) AS s
                  LEFT JOIN scale_interval AS i
                    ON s.kind = 'interval' AND i.k = s.g %% %(n_intervals)s
                  LEFT JOIN scale_cron AS c
                    ON s.kind = 'cron' AND c.k = (s.g / 2) %% %(n_crons)s
                 WHERE t.id = %(template)s""",  # noqa: S608
            {
                "template": template.pk,
                "first": datetime.fromtimestamp(first_at, UTC),
                "now": now,
                "every": EVERY_S,
                "due": DUE,
                "count": count,
                "n_intervals": len(intervals),
                "n_crons": len(crons),
            },
        )
        cur.execute("DROP TABLE scale_cron, scale_interval")
        cur.execute("VACUUM (ANALYZE) django_celery_beat_periodictask")
    return round(time.monotonic() - started, 1)


# --- measuring ----------------------------------------------------------------------------


def _line_at(log: str, text: str) -> float | None:
    for line in log.splitlines():
        if text in line:
            return common.log_timestamp(line)
    return None


def stock_entries_read_ms() -> float:
    """The stock path's read of the beat entries no task owns, as beat's start-up and
    reloads make it (``TaskScheduler.all_as_schedule``: query built, run, entries made)."""
    from project.celery import app
    from tasks_app.beat.scheduler import TaskScheduler

    scheduler = TaskScheduler(app=app, lazy=True)
    started = time.perf_counter()
    scheduler.all_as_schedule()
    took = time.perf_counter() - started
    scheduler.close()
    return round(took * 1000, 1)


SCANNED = ("tasks_app_task", "tasks_app_taskstate", "django_celery_beat_periodictask")


def table_reads() -> dict[str, dict[str, int]]:
    """Postgres's counters of the tables that grow with the stored schedules: sequential
    scans, rows they read, rows fetched through indexes."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT pg_stat_clear_snapshot()")
        cur.execute(
            """SELECT t.relname, t.seq_scan, t.seq_tup_read, COALESCE(t.idx_tup_fetch, 0),
                      io.heap_blks_hit + COALESCE(io.idx_blks_hit, 0),
                      io.heap_blks_read + COALESCE(io.idx_blks_read, 0)
                 FROM pg_stat_user_tables AS t
                 JOIN pg_statio_user_tables AS io USING (relid)
                WHERE t.relname = ANY(%s)""",
            [list(SCANNED)],
        )
        return {
            name: {
                "seq_scans": a,
                "seq_rows_read": b,
                "index_rows_fetched": c,
                # Pages found in Postgres's shared buffers / read from the OS (its cache or
                # the disk): the same rows cost more once the tables outgrow the buffers.
                "pages_hit": d,
                "pages_read": e,
            }
            for name, a, b, c, d, e in cur.fetchall()
        }


def reads_between(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]) -> Any:
    return {
        table: {key: after[table][key] - before[table][key] for key in after[table]}
        for table in after
    }


def measure_ours(count: int) -> dict[str, Any]:
    reset()
    out = common.LOG_DIR / f"receipts-scale-{time.time_ns()}.txt"
    with common.processes() as procs:
        procs.append(start_consumer(common.QUEUE, out))
        placeholder = time.time() + 3600
        seed_s = seed_owned(count, placeholder)
        read_ms = [stock_entries_read_ms() for _ in range(3)]
        time.sleep(1)  # the counters are flushed by each session about once a second
        reads_before = table_reads()
        spawned = time.time()
        first_at = spawned + LEAD_S
        _shift_due(
            "tasks_app_taskstate", "next_run_at", "task_id", "scale-", first_at - placeholder
        )
        beat = common.spawn_beat(name="scale-beat", TASKS_BEAT_LOG_TICKS="1")
        procs.append(beat)
        common.wait_until(
            lambda: FIRST_PASS in beat.log() or beat.popen.poll() is not None, timeout=120
        )
        first_pass = _line_at(beat.log(), FIRST_PASS)
        time.sleep(max(spawned + RUN_S - time.time(), 0))
        rss = beat.rss_mb()
        beat.stop()
        time.sleep(1.5)
        reads = reads_between(reads_before, table_reads())
        log = beat.log()
    fires = owned_fires(first_at, _window(), "queued_at")
    arrived = {run_id: at for at, run_id, _ in receipts(out)}
    lateness = [
        (arrived[run_id] - scheduled.timestamp()) * 1000
        for run_id, (scheduled, _) in fires.items()
        if run_id in arrived
    ]
    ticks = [float(m) for m in re.findall(r"beat tick: .*tick_ms=([\d.]+)", log)]
    first_ms = re.search(r"first pass done \(.*tick_ms=([\d.]+)\)", log)
    result = {
        "schedules": count,
        "due_every_10s": DUE,
        "seed_s": seed_s,
        "startup_s": round(first_pass - spawned, 2) if first_pass else None,
        "first_pass_ms": float(first_ms.group(1)) if first_ms else None,
        "rss_after_60s_mb": rss,
        "tick_ms": common.percentiles(ticks),
        "stock_entries_read_ms": min(read_ms),
        # By beat (start-up included) and the shift of the due fires above; the bench
        # reads nothing else meanwhile.
        "table_reads_during_run": reads,
        **in_time(lateness, _window()),
    }
    print(f"[bench] beat_scale ours {result}", flush=True)
    reset()
    return result


def _shift_due(table: str, column: str, key: str, prefix: str, by_s: float) -> None:
    """Move the due schedules' instants by ``by_s`` seconds: seeded relative to a placeholder,
    they start ``LEAD_S`` after the spawn (how long seeding takes is not known before)."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {table} SET {column} = {column} + make_interval(secs => %s) "  # noqa: S608
            f"WHERE {key} >= %s AND {key} < %s",
            [by_s, f"{prefix}0000000", f"{prefix}{DUE:07d}"],
        )


def measure_stock(count: int) -> dict[str, Any]:
    reset()
    with common.processes() as procs:
        placeholder = time.time() + 3600
        seed_s = seed_stock(count, placeholder)
        spawned = time.time()
        _shift_due(
            "django_celery_beat_periodictask",
            "last_run_at",
            "name",
            "stock-",
            spawned + LEAD_S - placeholder,
        )
        beat = common.spawn_beat(
            name="scale-stock-beat", scheduler="django_celery_beat.schedulers:DatabaseScheduler"
        )
        procs.append(beat)
        common.wait_until(
            lambda: STOCK_FIRST in beat.log() or beat.popen.poll() is not None,
            timeout=STOCK_TIMEOUT_S,
        )
        first = _line_at(beat.log(), STOCK_FIRST)
        time.sleep(max(spawned + RUN_S - time.time(), 0))
        rss = beat.rss_mb()
        beat.stop()
    reset()
    common.delete_queues(STOCK_QUEUE)
    result = {
        "entries": count,
        "seed_s": seed_s,
        "ticked": first is not None,
        "startup_s": round(first - spawned, 2) if first else None,
        "timeout_s": STOCK_TIMEOUT_S,
        "rss_mb": rss,
    }
    print(f"[bench] beat_scale stock {result}", flush=True)
    return result


def run(results_dir: Path, *, quick: bool = False) -> dict[str, Any]:
    size = SIZES["quick" if quick else "full"]
    ours = [measure_ours(n) for n in size["schedules"]]
    stock: list[dict[str, Any]] = []
    for n in size["stock"]:
        stock.append(measure_stock(n))
        if not stock[-1]["ticked"]:
            break
    managed = [s["entries"] for s in stock if s["ticked"]]
    small, large = ours[0], ours[-1]
    return {
        "scenario": "beat_scale",
        "inputs": {
            **size,
            "due_every_10s": DUE,
            "run_s": RUN_S,
            "stock_timeout_s": STOCK_TIMEOUT_S,
        },
        "ours": ours,
        "anchor_stock_database_scheduler": {
            "sizes": stock,
            "largest_managed": max(managed) if managed else None,
        },
        "ratios": {
            "rss_largest_vs_1000": common.ratio(
                large["rss_after_60s_mb"], small["rss_after_60s_mb"]
            ),
            "tick_p50_largest_vs_1000": common.ratio(
                large["tick_ms"]["p50"], small["tick_ms"]["p50"]
            ),
            "tick_p99_largest_vs_1000": common.ratio(
                large["tick_ms"]["p99"], small["tick_ms"]["p99"]
            ),
            "startup_largest_vs_1000": common.ratio(large["startup_s"], small["startup_s"]),
            "startup_ours_largest_vs_stock_largest_managed": common.ratio(
                large["startup_s"],
                next((s["startup_s"] for s in reversed(stock) if s["ticked"]), None),
            ),
        },
        "targets": {"startup_s_max": 5, "rss_vs_1000_max": 1.2, "in_broker_within_1s_pct": 99},
    }
