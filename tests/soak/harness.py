"""The fault soak: the Procfile's processes under load while faults drawn from a seed hit
them, then the history (run rows and the effect ledger, not logs) checked against what the
system promises. ``make soak`` runs it on a database, vhost and cache prefix of its own
(``tests/soak/__main__.py``); ``tests/soak/test_short_soak.py`` runs a short one in ``make test``.

One seed draws the fault schedule (kinds, targets, gaps, overlaps); the same seed replays the
same schedule. Load and process timing are the machine's, so a replay repeats the faults, not
every instant.
"""

from __future__ import annotations

import math
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests import clock_audit, installed
from tests.faketime import FaketimeUnavailable, SteppedClock
from tests.processes import ROOT, Proc, installed_project, spawn
from tests.web import free_port

# Process faults run on shared services; service faults only on the harness's own instances.
PROCESS_FAULTS = ("worker_kill", "worker_term", "beat_leader_kill", "worker_stop", "clock_step")
SERVICE_FAULTS = ("rabbitmq_app_restart", "rabbitmq_restart", "postgres_restart", "redis_restart")

# Short windows so a lost worker is noticed in seconds (production: 10 s heartbeat, 60 s
# stall), and a deploy's grace shorter than a long run so a deploy hands one back.
SOAK_ENV = {
    "TASKS_HEARTBEAT_SECONDS": "0.5",
    "TASKS_STALL_SECONDS": "3",
    "TASKS_DB_RETRY_SECONDS": "30",
    "TASKS_SHUTDOWN_GRACE_SECONDS": "8",
}
STALL_SECONDS = float(SOAK_ENV["TASKS_STALL_SECONDS"])
LONG_RUN_SECONDS = 20.0
INTERVAL_SECONDS = 10
# A clock step: the wall clock of the beat leader or of a worker moved by this many seconds
# (either way) and held for this long, then put back.
CLOCK_STEP_SECONDS = (120.0, 3600.0)
CLOCK_STEP_HOLD_SECONDS = (10.0, 25.0)
# A fault's window runs on this long after its end: pages may answer 5xx inside it.
WINDOW_TAIL = timedelta(seconds=2)
PAGE_SAMPLE_SECONDS = 1.0


def _now() -> datetime:
    return datetime.now(UTC)


def nearest_rank(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass
class Fault:
    kind: str
    target: str
    start: datetime
    end: datetime | None = None
    note: str = ""
    host: str = "-"  # the worker's node name prefix (its runs' ``worker``)

    def window(self) -> tuple[datetime, datetime]:
        return self.start, (self.end or _now()) + WINDOW_TAIL


@dataclass
class Slot:
    """One Procfile process the harness keeps running (a platform's dyno or pod)."""

    name: str
    kind: str  # web, worker, beat
    proc: Proc | None = None
    generation: int = 0
    faulted: bool = False  # the harness is acting on it: the supervisor leaves it alone


@dataclass
class Requested:
    id: str
    kind: str


@dataclass
class Soak:
    seed: int
    minutes: float
    log_dir: Path
    env: dict[str, str]
    faults: tuple[str, ...] = PROCESS_FAULTS
    fault_gap: tuple[float, float] = (20.0, 45.0)
    overlap_chance: float = 0.2
    drain_seconds: float = 240.0
    workers: int = 2
    beats: int = 2
    concurrency: int = 3
    service_restart: Callable[[str], None] | None = None
    say: Callable[[str], None] = print

    slots: list[Slot] = field(default_factory=list)
    requested: list[Requested] = field(default_factory=list)
    fault_log: list[Fault] = field(default_factory=list)
    # (sent, answered, path, status): a page counts inside a fault's window if any part of
    # its request was
    samples: list[tuple[datetime, datetime, str, int | str]] = field(default_factory=list)
    unexpected_exits: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # requests refused (a service was down)
    clocks: dict[str, SteppedClock] = field(default_factory=dict)  # slot name -> its clock
    _stop_load: threading.Event = field(default_factory=threading.Event)
    _stop_all: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- processes ---------------------------------------------------------------------

    def _args(self, slot: Slot) -> list[str]:
        py = sys.executable
        if slot.kind == "web":
            return [py, "-m", "gunicorn", "project.wsgi", "-c", "project/gunicorn.conf.py"]
        if slot.kind == "worker":
            return [
                *(py, "-m", "celery", "-A", installed.NAME, "worker", "-l", "info"),
                *("--without-gossip", "--without-mingle", "--concurrency", str(self.concurrency)),
                *("-n", f"soak-{slot.name}-{slot.generation}@%h"),
            ]
        pidfile = self.log_dir / f"{slot.name}-{slot.generation}.pid"
        return [
            py,
            "-m",
            "celery",
            "-A",
            installed.NAME,
            "beat",
            "-l",
            "info",
            "--pidfile",
            str(pidfile),
        ]

    def _ready_text(self, slot: Slot) -> str:
        return {"web": "Booting worker", "worker": "ready.", "beat": "beat: Starting"}[slot.kind]

    def start_slot(self, slot: Slot) -> Proc:
        slot.generation += 1
        env = {**self.env, "PORT": str(self.port), "HOST": "127.0.0.1"}
        cwd = ROOT
        if slot.kind != "web":  # workers and beats: the project a team installs
            project = installed_project()
            services = (env["DATABASE_URL"], env["CELERY_BROKER_URL"], env["REDIS_URL"])
            env, cwd = {**env, **project.env(*services)}, project.root
        if slot.name in self.clocks:
            env.update(self.clocks[slot.name].env())
        proc = spawn(f"{slot.name}-{slot.generation}", self._args(slot), self.log_dir, env, cwd=cwd)
        proc.wait_for_log(self._ready_text(slot), timeout=90)
        slot.proc = proc
        return proc

    def _supervise(self) -> None:
        """Restart any process that exited without the harness acting on it (and count it:
        a process that dies on its own is a finding)."""
        while not self._stop_all.is_set():
            for slot in self.slots:
                with self._lock:
                    if slot.faulted or slot.proc is None or slot.proc.popen.poll() is None:
                        continue
                    slot.faulted = True
                code = slot.proc.popen.returncode
                self.unexpected_exits.append(f"{slot.name} exited with {code} at {_now():%X}")
                self.say(f"soak: {slot.name} exited on its own ({code}); restarting it")
                try:
                    self.start_slot(slot)
                finally:
                    slot.faulted = False
            self._stop_all.wait(0.5)

    def _take(self, kind: str, rng: random.Random) -> Slot | None:
        with self._lock:
            free = [s for s in self.slots if s.kind == kind and not s.faulted and s.proc]
            if not free:
                return None
            slot = rng.choice(free)
            slot.faulted = True
            return slot

    def _leader(self) -> Slot | None:
        with self._lock:
            for slot in self.slots:
                if slot.kind != "beat" or slot.faulted or slot.proc is None:
                    continue
                lines = [
                    line
                    for line in slot.proc.log().splitlines()
                    if "beat leadership acquired" in line or "beat leadership lost" in line
                ]
                if lines and "acquired" in lines[-1]:
                    slot.faulted = True
                    return slot
        return None

    # -- faults ------------------------------------------------------------------------

    def inject(self, kind: str, rng: random.Random) -> None:
        if kind == "beat_leader_kill":
            slot = self._leader()
        elif kind == "clock_step":
            slot = (self._leader() if rng.random() < 0.5 else None) or self._take("worker", rng)
        elif kind in PROCESS_FAULTS:
            slot = self._take("worker", rng)
        else:
            slot = None
        if kind in PROCESS_FAULTS and slot is None:
            self.say(f"soak: no free target for {kind}; skipped")
            return
        fault = Fault(kind=kind, target=slot.name if slot else kind, start=_now())
        if slot is not None:
            fault.host = f"soak-{slot.name}-{slot.generation}@"
        with self._lock:
            self.fault_log.append(fault)
        self.say(f"soak: {fault.start:%X} {kind} on {fault.target}")
        try:
            if kind in ("worker_kill", "beat_leader_kill"):
                assert slot and slot.proc
                slot.proc.kill()
                self.start_slot(slot)
            elif kind == "worker_term":
                assert slot and slot.proc
                old = slot.proc
                os.kill(old.popen.pid, signal.SIGTERM)  # the platform's deploy signal
                self.start_slot(slot)  # the new release's worker, up beside the old one
                try:
                    old.popen.wait(30)  # the platform's grace, then SIGKILL
                except subprocess.TimeoutExpired:
                    fault.note = "killed after 30 s of grace"
                    old.kill()
            elif kind == "clock_step":
                assert slot
                offset = rng.choice((-1, 1)) * round(rng.uniform(*CLOCK_STEP_SECONDS))
                held = rng.uniform(*CLOCK_STEP_HOLD_SECONDS)
                fault.note = f"wall clock {offset:+d} s for {held:.0f} s"
                clock = self.clocks[slot.name]
                try:
                    clock.set(offset)
                    time.sleep(held)
                finally:
                    clock.set(0)
            elif kind == "worker_stop":
                assert slot and slot.proc
                os.killpg(slot.proc.popen.pid, signal.SIGSTOP)
                time.sleep(STALL_SECONDS + 3)
                os.killpg(slot.proc.popen.pid, signal.SIGCONT)
            else:
                assert self.service_restart is not None
                self.service_restart(kind)
        finally:
            fault.end = _now()
            if slot is not None:
                slot.faulted = False

    def _nemesis(self) -> None:
        rng = random.Random(self.seed)
        bag: list[str] = []
        threads: list[threading.Thread] = []
        self._stop_load.wait(rng.uniform(5, 10))
        while not self._stop_load.is_set():
            if not bag:
                bag = list(self.faults)
                rng.shuffle(bag)
            kind = bag.pop()
            t = threading.Thread(target=self.inject, args=(kind, random.Random(rng.random())))
            t.start()
            threads.append(t)
            overlap = rng.random() < self.overlap_chance
            gap = rng.uniform(1, 3) if overlap else rng.uniform(*self.fault_gap)
            self._stop_load.wait(gap)
        for t in threads:
            t.join()

    # -- load --------------------------------------------------------------------------

    def _setup_tasks(self) -> None:
        from django.contrib.auth import get_user_model

        from tasks_app import services
        from tasks_app.services.tokens import token_create

        tag = uuid.uuid4().hex[:6]
        make = services.task_create
        self.task_quick = make(
            id=f"soak-quick-{tag}",
            name="soak quick",
            action="test-effect",
            payload={"seconds": 0.2},
            max_retries=3,
            retry_backoff_seconds=1,
        )
        self.task_long = make(
            id=f"soak-long-{tag}",
            name="soak long",
            action="test-effect",
            payload={"seconds": LONG_RUN_SECONDS},
            timeout_seconds=90,
            max_retries=3,
            retry_backoff_seconds=1,
        )
        self.task_flaky = make(
            id=f"soak-flaky-{tag}",
            name="soak flaky",
            action="test-flaky",
            max_retries=3,
            retry_backoff_seconds=1,
        )
        common = {
            "action": "test-effect",
            "payload": {"seconds": 0.1},
            "max_retries": 3,
            "retry_backoff_seconds": 1,
            "catchup": "all",
            "catchup_window_seconds": 3600,
            "overlap_policy": "allow",
        }
        self.task_interval = make(
            id=f"soak-interval-{tag}",
            name="soak every 10 s",
            schedule_type="interval",
            interval_seconds=INTERVAL_SECONDS,
            **common,
        )
        self.task_cron = make(
            id=f"soak-cron-{tag}",
            name="soak every minute",
            schedule_type="cron",
            cron="* * * * *",
            timezone="UTC",
            **common,
        )
        user_model = get_user_model()
        user = user_model.objects.filter(username="soak").first()
        if user is None:
            user = user_model.objects.create_superuser("soak", "soak@example.com", self.password)
        else:
            user.set_password(self.password)
            user.save()
        self.token = token_create(user=user).token

    def _request(self, rng: random.Random, tick: int) -> None:
        from tasks_app import services
        from tests.django_tasks.functions import add

        def keep(run_id: Any, kind: str) -> None:
            self.requested.append(Requested(id=str(run_id), kind=kind))

        now = _now()
        keep(services.task_execute(task=self.task_quick).id, "now")
        if tick % 3 == 0:
            run = services.task_schedule_once(
                task=self.task_quick, delay_seconds=rng.uniform(1, 10)
            )
            keep(run.id, "delay")
        if tick % 5 == 0:
            at = now + timedelta(seconds=rng.uniform(2, 15))
            keep(services.task_schedule_once(task=self.task_quick, run_at=at).id, "at")
        if tick % 6 == 0:
            keep(services.task_execute(task=self.task_flaky).id, "flaky")
        if tick % 15 == 0:
            keep(services.task_execute(task=self.task_long).id, "long")
        if tick % 4 == 0:
            keep(add.enqueue(rng.randint(0, 99), rng.randint(0, 99)).id, "django_task")

    def _load(self) -> None:
        from django.db import connection

        rng = random.Random(self.seed + 1)
        tick = 0
        try:
            while not self._stop_load.is_set():
                try:
                    self._request(rng, tick)
                except Exception as exc:  # a service is down: the request is refused, not lost
                    self.refused.append(f"{_now():%X} {type(exc).__name__}: {exc}"[:300])
                    connection.close()
                tick += 1
                self._stop_load.wait(1.0)
        finally:
            connection.close()

    # -- pages -------------------------------------------------------------------------

    def _pages(self) -> None:
        import requests

        base = f"http://127.0.0.1:{self.port}"
        browser = requests.Session()

        def login() -> None:
            browser.get(f"{base}/admin/login/", timeout=10)
            browser.post(
                f"{base}/admin/login/",
                data={
                    "username": "soak",
                    "password": self.password,
                    "csrfmiddlewaretoken": browser.cookies.get("csrftoken", ""),
                    "next": "/admin/",
                },
                headers={"Referer": f"{base}/admin/login/"},
                timeout=10,
            )

        login()
        api = {"Authorization": f"Token {self.token}"}
        pages: list[tuple[str, dict[str, str]]] = [
            ("/admin/", {}),
            ("/admin/tasks_app/run/", {}),
            (f"/admin/tasks_app/task/{self.task_quick.pk}/change/", {}),
            ("/api/runs", api),
            ("/metrics", {}),
        ]
        started = time.monotonic()
        rounds = 0
        while not self._stop_all.is_set():
            for path, headers in pages:
                at = _now()
                try:
                    response = browser.get(
                        base + path, headers=headers, timeout=10, allow_redirects=False
                    )
                    status: int | str = response.status_code
                    if path.startswith("/admin/") and status == 302:
                        login()  # the session was lost: sign in again, count the page
                except requests.RequestException as exc:
                    status = type(exc).__name__
                self.samples.append((at, _now(), path, status))
            rounds += 1  # one round a second, however long the pages took
            self._stop_all.wait(max(0.0, started + rounds * PAGE_SAMPLE_SECONDS - time.monotonic()))

    # -- the run -----------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        from django.db import connection

        self.port = free_port()
        self.password = uuid.uuid4().hex
        self._setup_tasks()
        self.slots = [Slot("web", "web")]
        self.slots += [Slot(f"worker{i + 1}", "worker") for i in range(self.workers)]
        self.slots += [Slot(f"beat{i + 1}", "beat") for i in range(self.beats)]
        if "clock_step" in self.faults:
            try:
                self.clocks = {
                    s.name: SteppedClock(self.log_dir / "clocks", s.name)
                    for s in self.slots
                    if s.kind != "web"
                }
                next(iter(self.clocks.values())).env()  # the sleep shim, built now
            except FaketimeUnavailable as exc:
                self.say(f"soak: no clock_step faults: {exc}")
                self.clocks = {}
                self.faults = tuple(f for f in self.faults if f != "clock_step")
        clock_audit.install()  # the database's record of inserts and claims (check())
        for slot in self.slots:
            self.start_slot(slot)
        self.start = _now()
        self.say(f"soak: seed {self.seed}, {self.minutes} min, faults {', '.join(self.faults)}")
        threads = [threading.Thread(target=f, daemon=True) for f in (self._supervise, self._pages)]
        load = threading.Thread(target=self._load, daemon=True)
        nemesis = threading.Thread(target=self._nemesis, daemon=True)
        for t in (*threads, load, nemesis):
            t.start()
        try:
            self._stop_load.wait(self.minutes * 60)
            self._stop_load.set()
            self.load_end = _now()
            load.join()
            nemesis.join()
            self.say(f"soak: load stopped at {self.load_end:%X}; waiting for the runs to end")
            self._drain()
            self.end = _now()
        finally:
            self._stop_all.set()
            for t in threads:
                t.join(15)
            for slot in self.slots:
                if slot.proc is not None:
                    slot.proc.stop()
            connection.close()
        try:
            return self.check()
        finally:
            clock_audit.uninstall()
            connection.close()

    def _drain(self) -> None:
        """Wait until every requested run and every fire up to the end of the load has an
        outcome (its attempts, retries included, all ended)."""
        from django.db.models import Q

        from tasks_app.models import FINAL_RUN_STATUSES, Run

        on_demand = [self.task_quick, self.task_long, self.task_flaky]
        scheduled = [self.task_interval, self.task_cron]
        open_runs = Run.objects.exclude(status__in=FINAL_RUN_STATUSES).filter(
            Q(task__in=on_demand)
            | Q(task__action="django_task", created_at__gte=self.start)
            | Q(task__in=scheduled, scheduled_for__lte=self.load_end)
            | Q(task__in=scheduled, first_attempt__scheduled_for__lte=self.load_end)
        )
        from django.db import InterfaceError, OperationalError, connection

        connection.close()  # a service restart may have broken this thread's connection
        deadline = time.monotonic() + self.drain_seconds
        while True:
            try:
                if not open_runs.exists():
                    return
            except (OperationalError, InterfaceError):
                connection.close()
            if time.monotonic() > deadline:
                self.say("soak: runs still open after the drain window")
                return
            time.sleep(1)

    # -- the checks --------------------------------------------------------------------

    def check(self) -> dict[str, Any]:
        from tasks_app import selectors
        from tasks_app.models import Run
        from tests.effects.models import Effect, Execution

        # Every requested run, by the id handed out: its outcome over all its attempts.
        outcomes: dict[str, Counter[str]] = defaultdict(Counter)
        not_completed: list[str] = []
        chain_of: dict[str, str] = {}
        for req in self.requested:
            outcome = selectors.run_outcome(run=Run.objects.get(id=req.id))
            status = outcome.status or f"open:{outcome.latest.status}"
            outcomes[req.kind][status] += 1
            first = str(outcome.attempts[0].id)
            chain_of[first] = req.kind
            if status != "completed":
                not_completed.append(f"{req.kind} {req.id} {status}")

        # Interval and cron fires between the start and the end of the load: each instant once.
        fires: dict[str, dict[str, Any]] = {}
        margin = timedelta(seconds=3)
        for task, expected in (
            (self.task_interval, self._interval_instants()),
            (self.task_cron, self._cron_instants()),
        ):
            rows = list(
                Run.objects.filter(task=task, trigger="schedule", first_attempt__isnull=True)
            )
            recorded = Counter(
                r.scheduled_for
                for r in rows
                if self.start + margin <= r.scheduled_for <= self.load_end - margin
            )
            exp = {t for t in expected if self.start + margin <= t <= self.load_end - margin}
            fires[task.schedule_type] = {
                "expected": len(exp),
                "recorded": len(recorded),
                "missing": sorted(t.isoformat() for t in exp - set(recorded)),
                "twice": sorted(t.isoformat() for t, n in recorded.items() if n > 1),
                "unexpected": sorted(t.isoformat() for t in set(recorded) - exp),
            }
            for r in rows:
                if self.start + margin <= r.scheduled_for <= self.load_end - margin:
                    outcome = selectors.run_outcome(run=r)
                    status = outcome.status or f"open:{outcome.latest.status}"
                    outcomes[f"fire_{task.schedule_type}"][status] += 1
                    chain_of[str(r.id)] = f"fire_{task.schedule_type}"
                    if status != "completed":
                        not_completed.append(f"fire {r.id} {status}")

        # The effect ledger, keyed by first-attempt id (django_task runs write none).
        ledger_chains = {k for k, kind in chain_of.items() if kind != "django_task"}
        keys = [uuid.UUID(k) for k in ledger_chains]
        effects = Counter(
            str(k) for k in Effect.objects.filter(run_id__in=keys).values_list("run_id", flat=True)
        )
        executions = list(Execution.objects.filter(run_id__in=keys))
        attempts = list(Run.objects.filter(id__in=keys)) + list(
            Run.objects.filter(first_attempt_id__in=keys)
        )
        completed_per_chain = Counter(
            str(r.first_attempt_id or r.id) for r in attempts if r.status == "completed"
        )
        flaky_chains = {k for k, kind in chain_of.items() if kind == "flaky"}
        expected_executions = len(effects) + len(flaky_chains)  # a flaky run fails once first
        overlaps = self._overlaps(attempts, executions)

        # Pages outside fault windows.
        windows = [f.window() for f in self.fault_log]
        bad_pages = [
            (at, path, status)
            for at, done, path, status in self.samples
            if (not isinstance(status, int) or status >= 500)
            and not any(at <= b and done >= a for a, b in windows)
        ]
        by_path = Counter(path for _, _, path, _ in self.samples)

        # Recovery: a fault's end to the first run completed after it.
        recovery: dict[str, list[float]] = defaultdict(list)
        for fault in self.fault_log:
            assert fault.end is not None
            first = (
                Run.objects.filter(status="completed", finished_at__gte=fault.end)
                .order_by("finished_at")
                .values_list("finished_at", flat=True)
                .first()
            )
            if first is not None:
                recovery[fault.kind].append((first - fault.end).total_seconds())
        # The runs a fault cut off: from the fault's start to their next attempt's completion.
        cut_off: dict[str, list[float]] = defaultdict(list)
        done_at = {
            str(r.first_attempt_id or r.id): r.finished_at
            for r in attempts
            if r.status == "completed"
        }
        for fault in self.fault_log:
            assert fault.end is not None
            for r in attempts:
                if (
                    r.status == "interrupted"
                    and (r.worker or "").startswith(fault.host)
                    and fault.start <= r.finished_at <= fault.end + timedelta(seconds=60)
                ):
                    end = done_at.get(str(r.first_attempt_id or r.id))
                    if end is not None:
                        cut_off[fault.kind].append((end - fault.start).total_seconds())

        # One clock, by the database's own record: no run started before its due instant, no
        # fire recorded for an instant beat could not have reached yet.
        early = clock_audit.early_starts(since=self.start)
        ahead = clock_audit.future_fires(since=self.start)

        report: dict[str, Any] = {
            "seed": self.seed,
            "minutes": self.minutes,
            "start": self.start.isoformat(),
            "load_end": self.load_end.isoformat(),
            "end": self.end.isoformat(),
            "faults": dict(Counter(f.kind for f in self.fault_log)),
            "fault_log": [
                {
                    "kind": f.kind,
                    "target": f.target,
                    "start": f.start.isoformat(),
                    "end": f.end.isoformat() if f.end else None,
                    "note": f.note,
                }
                for f in self.fault_log
            ],
            "overlapping_faults": sum(
                1
                for a, b in zip(self.fault_log, self.fault_log[1:], strict=False)
                if a.end and b.start < a.end
            ),
            "requested": {kind: sum(c.values()) for kind, c in outcomes.items()},
            "outcomes": {kind: dict(c) for kind, c in outcomes.items()},
            "not_completed": not_completed[:50],
            "failed": sum(c.get("failed", 0) for c in outcomes.values()),
            "fires": fires,
            "effects": {
                "requested_with_ledger": len(ledger_chains),
                "effects": len(effects),
                "missing": len(ledger_chains - set(effects)),
                "duplicate_effects": sum(1 for n in effects.values() if n > 1),
                "completed_twice": sum(1 for n in completed_per_chain.values() if n > 1),
                "executions": len(executions),
                "raw_re_executions": max(0, len(executions) - expected_executions),
            },
            "overlapping_attempts": sum(len(v) for v in overlaps.values()),
            "overlapping_after_stall": len(overlaps["after_stall"]),
            "overlaps": {k: v[:20] for k, v in overlaps.items()},
            "pages": {
                "samples": len(self.samples),
                "by_path": dict(by_path),
                "5xx_outside_faults": len(bad_pages),
                "bad": [(a.isoformat(), p, s) for a, p, s in bad_pages[:20]],
                "5xx_inside_faults": sum(
                    1 for *_, s in self.samples if not isinstance(s, int) or s >= 500
                )
                - len(bad_pages),
            },
            "recovery_seconds": {
                kind: {
                    "n": len(v),
                    "p50": nearest_rank(v, 0.5),
                    "p99": nearest_rank(v, 0.99),
                    "max": max(v),
                }
                for kind, v in recovery.items()
            },
            "cut_off_runs_seconds": {
                kind: {"n": len(v), "p50": nearest_rank(v, 0.5), "p99": nearest_rank(v, 0.99)}
                for kind, v in cut_off.items()
            },
            "unexpected_exits": self.unexpected_exits,
            "requests_refused": self.refused[:50],
            "clock": {
                "early_starts": len(early),
                "future_fires": len(ahead),
                "examples": [str(e) for e in (early + ahead)[:20]],
            },
        }
        fires_ok = all(not f["missing"] and not f["twice"] for f in fires.values())
        effects = report["effects"]
        report["problems"] = [
            text
            for failed, text in (
                (bool(not_completed), f"{len(not_completed)} requested runs not completed"),
                (report["failed"] > 0, f"{report['failed']} runs failed"),
                (not fires_ok, "interval/cron fires missing or recorded twice"),
                (effects["missing"] > 0, f"{effects['missing']} runs without their effect"),
                (effects["completed_twice"] > 0, "runs completed twice"),
                (
                    report["overlapping_attempts"] > 0,
                    f"{report['overlapping_attempts']} overlapping attempts of one run",
                ),
                (len(bad_pages) > 0, f"{len(bad_pages)} page errors outside fault windows"),
                (bool(self.unexpected_exits), "processes exited on their own"),
                (bool(early), f"{len(early)} runs started before they were due"),
                (bool(ahead), f"{len(ahead)} fires recorded ahead of the database's clock"),
                (not self.fault_log, "no fault was injected"),
            )
            if failed
        ]
        report["ok"] = not report["problems"]
        return report

    def _overlaps(self, attempts: list[Any], executions: list[Any]) -> dict[str, list[str]]:
        """Pairs of attempts of one requested run that executed at the same moment.

        ``rows``: by the attempts' rows (started..finished), what the system recorded.
        ``ledger``: by the action bodies (start..return, from the effect ledger), apart from
        ``after_stall``: a body whose process was frozen (SIGSTOP) past the stall window, its
        run handed to another worker, that went on after SIGCONT instead of being stopped by
        its lease (``tasks_app.worker.recovery.lease_lost``). All three count as overlaps.
        """
        rows = {r.id: r for r in attempts}
        stops = [f for f in self.fault_log if f.kind == "worker_stop"]

        def pairs(spans: dict[Any, list[tuple[datetime, datetime, Any]]]) -> list[tuple[Any, ...]]:
            out = []
            for key, items in spans.items():
                items.sort()
                for i, (a_start, a_end, a_id) in enumerate(items):
                    for b_start, _b_end, b_id in items[i + 1 :]:
                        if b_start >= a_end:
                            break
                        if b_id != a_id:
                            out.append((key, a_id, a_start, a_end, b_id, b_start))
            return out

        by_rows: dict[Any, list[tuple[datetime, datetime, Any]]] = defaultdict(list)
        for r in attempts:
            if r.started_at and r.finished_at:
                by_rows[r.first_attempt_id or r.id].append((r.started_at, r.finished_at, r.id))
        by_ledger: dict[Any, list[tuple[datetime, datetime, Any]]] = defaultdict(list)
        for e in executions:
            row = rows.get(e.attempt_run_id)
            end = e.finished_at or (row.finished_at if row else None) or e.at
            by_ledger[e.run_id].append((e.at, end, e.attempt_run_id))

        def frozen(a_id: Any, at: datetime) -> bool:
            worker = getattr(rows.get(a_id), "worker", "") or ""
            return any(worker.startswith(f.host) and f.start <= at <= (f.end or at) for f in stops)

        def text(p: tuple[Any, ...]) -> str:
            key, a_id, a_start, a_end, b_id, b_start = p
            return (
                f"run {key}: attempt {a_id} {a_start:%X.%f}..{a_end:%X.%f}, "
                f"attempt {b_id} from {b_start:%X.%f}"
            )

        ledger = pairs(by_ledger)
        return {
            "rows": [text(p) for p in pairs(by_rows)],
            "ledger": [text(p) for p in ledger if not frozen(p[1], p[5])],
            "after_stall": [text(p) for p in ledger if frozen(p[1], p[5])],
        }

    def _interval_instants(self) -> list[datetime]:
        from tasks_app.models import Run

        first = (
            Run.objects.filter(task=self.task_interval, trigger="schedule")
            .order_by("scheduled_for")
            .values_list("scheduled_for", flat=True)
            .first()
        )
        if first is None:
            return []
        out, t = [], first
        while t <= self.load_end:
            out.append(t)
            t += timedelta(seconds=INTERVAL_SECONDS)
        return out

    def _cron_instants(self) -> list[datetime]:
        t = self.task_cron.created_at.replace(second=0, microsecond=0) + timedelta(minutes=1)
        out = []
        while t <= self.load_end:
            out.append(t)
            t += timedelta(minutes=1)
        return out


def summary(report: dict[str, Any]) -> str:
    """The report as a reader wants it first: one line per check."""
    e = report["effects"]
    lines = [
        f"soak seed {report['seed']}: {report['minutes']} min, "
        f"{'OK' if report['ok'] else 'FAILED: ' + '; '.join(report['problems'])}",
        f"  faults: {report['faults']} (overlapping: {report['overlapping_faults']})",
        f"  requested runs: {report['requested']}",
        f"  outcomes: {report['outcomes']}",
        "  fires: "
        + ", ".join(
            f"{k} {v['recorded']}/{v['expected']} (missing {len(v['missing'])}, "
            f"twice {len(v['twice'])})"
            for k, v in report["fires"].items()
        ),
        f"  effects: {e['effects']} of {e['requested_with_ledger']} (missing {e['missing']}, "
        f"completed twice {e['completed_twice']}), executions {e['executions']}, "
        f"raw re-executions {e['raw_re_executions']}",
        f"  overlapping attempts: {report['overlapping_attempts']} (of which a stopped worker's "
        f"body resumed beside the next attempt: {report['overlapping_after_stall']})",
        f"  clock: early starts {report['clock']['early_starts']}, "
        f"fires ahead {report['clock']['future_fires']}",
        f"  pages: {report['pages']['samples']} samples, 5xx outside faults "
        f"{report['pages']['5xx_outside_faults']}, inside {report['pages']['5xx_inside_faults']}",
        "  recovery (s): "
        + ", ".join(
            f"{k} p50 {v['p50']:.2f} p99 {v['p99']:.2f} (n={v['n']})"
            for k, v in report["recovery_seconds"].items()
        ),
    ]
    if report["cut_off_runs_seconds"]:
        lines.append(
            "  runs cut off by a fault, its start to their completion (s): "
            + ", ".join(
                f"{k} p50 {v['p50']:.1f} p99 {v['p99']:.1f} (n={v['n']})"
                for k, v in report["cut_off_runs_seconds"].items()
            )
        )
    if report["requests_refused"]:
        lines.append(
            f"  requests refused while a service was down: {len(report['requests_refused'])}"
        )
    if report["unexpected_exits"]:
        lines.append(f"  processes exited on their own: {report['unexpected_exits']}")
    return "\n".join(lines)


__all__ = ["PROCESS_FAULTS", "ROOT", "SERVICE_FAULTS", "SOAK_ENV", "Soak", "summary"]
