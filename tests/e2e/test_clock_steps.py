"""One clock: real ``celery beat``, ``celery worker`` and web processes whose host's wall clock
is stepped an hour ahead or behind while they run (libfaketime, ``tests/faketime.py``) keep
to the database's clock, and say that their host's clock is off.

The database records when each run was inserted and claimed, by its own clock
(``tests/clock_audit.py``), so whatever a stepped process believed, each test counts: runs
started before they were due, fires recorded for an instant beat could not yet have reached,
fires missed, runs claimed or fires recorded twice; and every run it asked for completes
(none expired, interrupted or timed out for a false "now"). Each process says so in its log
(a WARNING naming its offset) and ``/api/health``'s ``clock`` check names it.

The processes are shared by the module (beat, a worker, web); each test steps one clock and
puts it back. The standby beat's test kills the leader, so it comes last.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tasks_app import services
from tasks_app.models import FINAL_RUN_STATUSES, Run, RunStatus, Task
from tests import clock_audit
from tests.faketime import FaketimeUnavailable, SteppedClock
from tests.processes import Proc, start_beat, start_web, start_worker, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

HOUR = 3600.0
# Lease windows short enough that a run judged stalled on a false "now" would be interrupted
# within a step (the soak's values).
ENV = {"TASKS_HEARTBEAT_SECONDS": "0.5", "TASKS_STALL_SECONDS": "5"}
# How long each step is held.
HOLD = timedelta(seconds=12)
# A fire due this close to the end of a window may still be on its way.
FIRE_MARGIN = timedelta(seconds=3)
WARNING = re.compile(r"WARNING.*this host's clock is (\d+\.\d+) s (ahead of|behind) the database's")


@dataclass
class Stack:
    beat: Proc
    worker: Proc
    web: Proc
    base: str
    clocks: dict[str, SteppedClock]
    logs: Path
    worker_start: str  # the worker's log when it was ready (started an hour ahead)
    web_start: str  # web's log when it first answered (started an hour ahead)


@pytest.fixture(scope="module")
def clocks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SteppedClock]:
    folder = tmp_path_factory.mktemp("clocks")
    try:
        made = {name: SteppedClock(folder, name) for name in ("beat", "worker", "web", "standby")}
        made["beat"].env()  # compiles the sleep shim
    except FaketimeUnavailable as exc:
        pytest.skip(f"no stepped clock on this machine: {exc}")
    return made


@pytest.fixture(scope="module")
def audit(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    with django_db_blocker.unblock():
        clock_audit.install()
    yield
    with django_db_blocker.unblock():
        clock_audit.uninstall()


@pytest.fixture(scope="module")
def stack(
    _session_queue: str, process_logs: Path, clocks: dict[str, SteppedClock], audit: None
) -> Iterator[Stack]:
    """Beat, a worker and web; the worker and web start with their clock an hour ahead (what
    they log about it from the start is checked), put back once they are up."""
    started: list[Proc] = []
    try:
        clocks["worker"].set(HOUR)
        clocks["web"].set(HOUR)
        worker = start_worker(process_logs, **ENV, **clocks["worker"].env())
        started.append(worker)
        web, base = start_web(process_logs, **ENV, **clocks["web"].env())
        started.append(web)
        beat = start_beat(process_logs, **ENV, **clocks["beat"].env())
        started.append(beat)
        worker_start, web_start = worker.log(), web.log()
        clocks["worker"].set(0)
        clocks["web"].set(0)
        # Each says its clock is back (web when it next reads it: a request), so that a
        # test's step is news to it.
        for proc in (worker, web):
            wait_until(
                lambda proc=proc: "clock is back within" in proc.log() or poke(base),
                timeout=30,
                interval=1,
                message=f"{proc.name} to see its clock back",
            )
        yield Stack(beat, worker, web, base, clocks, process_logs, worker_start, web_start)
    finally:
        for clock in clocks.values():
            clock.set(0)
        for proc in started:
            proc.stop()


# --- helpers ------------------------------------------------------------------------------


def poke(base: str) -> bool:
    """A request to web (it reads its clock); always false."""
    try:
        urllib.request.urlopen(f"{base}/api/health", timeout=10).close()  # noqa: S310 - local
    except urllib.error.HTTPError:
        pass
    return False


def interval_task(seconds: int = 2, **fields: Any) -> Task:
    return services.task_create(
        id=f"clock-every-{uuid.uuid4().hex[:8]}",
        name="every few seconds",
        action="noop",
        queue=settings.CELERY_TASK_DEFAULT_QUEUE,
        schedule_type="interval",
        interval_seconds=seconds,
        expires_after_seconds=30,
        **fields,
    )


def on_demand_task(action: str = "noop", **fields: Any) -> Task:
    return services.task_create(
        id=f"clock-once-{uuid.uuid4().hex[:8]}",
        name="on demand",
        action=action,
        queue=settings.CELERY_TASK_DEFAULT_QUEUE,
        **fields,
    )


def hold(since: datetime, span: timedelta = HOLD) -> None:
    """Wait until the database's clock is ``span`` past ``since``."""
    wait_until(
        lambda: clock_audit.db_now() >= since + span,
        timeout=span.total_seconds() + 30,
        interval=0.5,
        message="the step's hold",
    )


def warns(text: str, offset: float) -> bool:
    """Whether ``text`` (a log) has a WARNING line saying its host's clock is ``offset``
    seconds off (ahead when positive)."""
    way = "ahead of" if offset > 0 else "behind"
    for match in WARNING.finditer(text):
        if match.group(2) == way and abs(float(match.group(1)) - abs(offset)) < 2:
            return True
    return False


def warned(proc: Proc, offset: float, *, since: int = 0) -> None:
    """``proc`` logs (after the first ``since`` characters of its log) a WARNING line saying
    its host's clock is ``offset`` seconds off."""
    wait_until(
        lambda: warns(proc.log()[since:], offset),
        timeout=20,
        interval=0.5,
        message=f"{proc.name} to warn of {offset:+g} s",
    )


def staff_token() -> str:
    from django.contrib.auth import get_user_model

    from tasks_app.services.tokens import token_create

    user = get_user_model().objects.create_superuser(
        f"ops-{uuid.uuid4().hex[:8]}", "ops@example.com", uuid.uuid4().hex
    )
    return token_create(user=user).token


def call(base: str, token: str, method: str, path: str, payload: Any = None) -> tuple[int, Any]:
    request = urllib.request.Request(
        base + path,
        method=method,
        data=None if payload is None else json.dumps(payload).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Token {token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - local
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def health_names(stack: Stack, token: str, prefix: str, offset: float) -> str:
    """The process ``/api/health``'s ``clock`` check names as off by ``offset`` seconds,
    whose name starts with ``prefix``; the check says so (advisory: not a 503)."""

    def named() -> str | None:
        status, body = call(stack.base, token, "GET", "/api/health")
        check = body["clock"]
        if check["ok"] or "clock" in body["down"]:
            return None
        for name in check["skewed"]:
            if name.startswith(prefix) and abs(check["processes"][name] - offset) < 2:
                return str(name)
        return None

    return str(
        wait_until(named, timeout=20, interval=1, message=f"/api/health to name {prefix} off")
    )


def settled(run_ids: list[Any], timeout: float = 45) -> dict[str, str]:
    """The runs' statuses once all have ended, or after ``timeout`` (some still open)."""

    def statuses() -> dict[str, str]:
        rows = Run.objects.filter(id__in=run_ids).values_list("id", "status")
        return {str(k): v for k, v in rows}

    try:
        wait_until(
            lambda: all(s in FINAL_RUN_STATUSES for s in statuses().values()),
            timeout=timeout,
            interval=0.5,
            message="the runs to end",
        )
    except AssertionError:
        pass  # reported as not completed
    return statuses()


def fire_runs(task: Task, since: datetime, until: datetime) -> list[Any]:
    return list(
        Run.objects.filter(
            task=task, trigger="schedule", scheduled_for__gt=since, scheduled_for__lte=until
        ).values_list("id", flat=True)
    )


def findings(
    since: datetime, tasks: list[str], runs: list[Any], lost: list[datetime] | None = None
) -> dict[str, list[str]]:
    """What went wrong, by the database's record (all empty when nothing did): runs started
    early, fires recorded ahead, runs claimed or fires recorded twice, fires ``lost``, and
    ``runs`` that did not complete (expired, interrupted, timed out, or still waiting)."""
    statuses = settled(runs)
    errors = Run.objects.filter(id__in=runs).exclude(error="").values_list("error", flat=True)
    return {
        "early starts": [str(e) for e in clock_audit.early_starts(since=since, tasks=tasks)],
        "future fires": [str(e) for e in clock_audit.future_fires(since=since, tasks=tasks)],
        "duplicates": clock_audit.duplicates(since=since, tasks=tasks),
        "lost fires": [t.isoformat() for t in lost or []],
        "not completed": [f"{k} {v}" for k, v in statuses.items() if v != RunStatus.COMPLETED]
        + [f"{k} missing" for k in map(str, runs) if k not in statuses],
        "errors": [e[:200] for e in errors],
    }


def assert_none(found: dict[str, list[str]]) -> None:
    counts = {kind: len(items) for kind, items in found.items()}
    assert not any(counts.values()), f"{counts}: {found}"


# --- the tests ----------------------------------------------------------------------------


def test_a_worker_and_web_started_an_hour_ahead_log_a_warning_saying_so(stack: Stack) -> None:
    """The first thing they say about their clock goes through the logging they were
    configured with: a WARNING line (Celery's format for the worker, the project's LOGGING
    for web), not a bare line printed before logging was set up."""
    assert warns(stack.worker_start, HOUR), stack.worker_start[-3000:]
    assert warns(stack.web_start, HOUR), stack.web_start[-3000:]


def test_beat_an_hour_behind_then_ahead_fires_on_the_database_clock(stack: Stack) -> None:
    token = staff_token()
    every = interval_task(catchup="all", catchup_window_seconds=3600)
    later = on_demand_task()
    started = clock_audit.db_now()
    # Delayed runs that beat releases while its clock is stepped, with a deadline.
    delayed = [
        services.task_schedule_once(task=later, delay_seconds=d, expires_in_seconds=20).id
        for d in (8, 14, 20, 26, 32)
    ]
    lost: list[datetime] = []
    try:
        for offset in (-HOUR, HOUR):
            mark = len(stack.beat.log())
            stack.clocks["beat"].set(offset)
            since = clock_audit.db_now()
            warned(stack.beat, offset, since=mark)
            name = health_names(stack, token, "beat@", offset)
            assert f"pid {stack.beat.popen.pid}" in name
            hold(since)
            # Judged before the clock is put back: a beat on its own clock would catch the
            # missed fires up afterwards.
            lost += clock_audit.lost_fires(every.id, since, clock_audit.db_now() - FIRE_MARGIN)
    finally:
        stack.clocks["beat"].set(0)
    ended = clock_audit.db_now() - FIRE_MARGIN
    runs = delayed + fire_runs(every, started, ended)
    assert_none(findings(started, [every.id, later.id], runs, lost))


def test_a_worker_an_hour_ahead_or_behind_starts_runs_when_due(stack: Stack) -> None:
    token = staff_token()
    every = interval_task()
    later = on_demand_task()
    slow = on_demand_task("sleep", payload={"seconds": 3}, timeout_seconds=20)
    started = clock_audit.db_now()
    asked: list[Any] = []
    try:
        for offset in (HOUR, -HOUR):
            mark = len(stack.worker.log())
            stack.clocks["worker"].set(offset)
            warned(stack.worker, offset, since=mark)
            name = health_names(stack, token, "test-", offset)
            assert f"pid {stack.worker.popen.pid}" in name
            now = clock_audit.db_now()
            asked += [
                services.task_schedule_once(task=later, delay_seconds=3, expires_in_seconds=20).id,
                services.task_schedule_once(task=later, delay_seconds=4).id,  # no deadline
                services.task_schedule_once(
                    task=later, run_at=now + timedelta(seconds=6), expires_in_seconds=20
                ).id,
                services.task_execute(task=slow).id,  # runs across the next step
            ]
            hold(now, timedelta(seconds=8))
            stack.clocks["worker"].set(0)
            settled(asked, timeout=20)
    finally:
        stack.clocks["worker"].set(0)
    ended = clock_audit.db_now() - FIRE_MARGIN
    lost = clock_audit.lost_fires(every.id, started, ended)
    runs = asked + fire_runs(every, started, ended)
    assert_none(findings(started, [every.id, later.id, slow.id], runs, lost))


def test_web_an_hour_ahead_schedules_on_the_database_clock(stack: Stack) -> None:
    token = staff_token()
    base = {"action": "noop", "queue": settings.CELERY_TASK_DEFAULT_QUEUE}
    mark = len(stack.web.log())
    stack.clocks["web"].set(HOUR)
    try:
        warned_name = health_names(stack, token, "web@", HOUR)
        warned(stack.web, HOUR, since=mark)
        before = clock_audit.db_now()
        status, every = call(
            stack.base,
            token,
            "POST",
            "/api/tasks",
            {
                **base,
                "id": f"clock-web-{uuid.uuid4().hex[:6]}",
                "name": "web every 3 s",
                "schedule_type": "interval",
                "interval_seconds": 3,
            },
        )
        assert status == 201, every
        status, delayed = call(
            stack.base,
            token,
            "POST",
            "/api/tasks",
            {
                **base,
                "id": f"clock-web-{uuid.uuid4().hex[:6]}",
                "name": "web delayed",
                "delay_seconds": 4,
                "expires_in_seconds": 30,
            },
        )
        assert status == 201, delayed
        run_at = clock_audit.db_now() + timedelta(minutes=10)
        status, at = call(
            stack.base,
            token,
            "POST",
            "/api/tasks",
            {
                **base,
                "id": f"clock-web-{uuid.uuid4().hex[:6]}",
                "name": "web at",
                "run_at": run_at.isoformat(),
            },
        )
        after = clock_audit.db_now()
    finally:
        stack.clocks["web"].set(0)
    assert warned_name.startswith("web@")
    # The first fire one interval after the request, the delay counted from it, and a
    # run_at 10 minutes ahead valid: by the database's clock, whatever web's host says.
    first = datetime.fromisoformat(every["next_run_at"])
    due = datetime.fromisoformat(delayed["run"]["due_at"])
    judged = {
        "first fire": before + timedelta(seconds=3) <= first <= after + timedelta(seconds=3),
        "delay": before + timedelta(seconds=4) <= due <= after + timedelta(seconds=4),
        "run_at accepted": status == 201 and bool(at.get("run")),
    }
    assert all(judged.values()), (judged, every, delayed, at)
    assert datetime.fromisoformat(at["run"]["due_at"]) == run_at
    lost = []
    try:
        wait_until(
            lambda: clock_audit.recorded_fires(every["id"]),
            timeout=20,
            message="the schedule made on web to fire",
        )
    except AssertionError:
        lost = [first]
    tasks = [every["id"], delayed["id"], at["id"]]
    assert_none(findings(before, tasks, [delayed["run"]["id"]], lost))


def test_a_standby_beat_30_s_ahead_takes_over_on_the_database_clock(
    stack: Stack, beat_factory: Any
) -> None:
    token = staff_token()
    every = interval_task()
    stack.clocks["standby"].set(30)
    standby = beat_factory(**ENV, **stack.clocks["standby"].env())
    warned(standby, 30)
    name = health_names(stack, token, "beat@", 30)
    assert f"pid {standby.popen.pid}" in name
    wait_until(
        lambda: clock_audit.recorded_fires(every.id), timeout=20, message="the leader to fire"
    )
    stack.beat.kill()
    killed = clock_audit.db_now()
    standby.wait_for_log("beat leadership acquired", timeout=60)
    hold(killed)
    ended = clock_audit.db_now() - FIRE_MARGIN
    lost = clock_audit.lost_fires(every.id, killed, ended)
    assert_none(findings(killed, [every.id], fire_runs(every, killed, ended), lost))
