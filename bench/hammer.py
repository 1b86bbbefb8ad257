"""Hammer the embedded stack and count what broke.

    python -m bench.hammer --minutes 10      (or --minutes 1 for a quick look)

Starts the embedded stack itself through the launcher (``python -m project.embedded``, what
``make run`` runs) under a temporary ``TASKS_VAR_DIR`` on a free port, then for the given time:

- 8 concurrent callers loop on ``GET /api/health`` and ``GET /api/tasks`` (token auth);
- ``--rate`` (50) runs/s of the ``echo`` action: ``--rate`` tasks with an interval schedule
  of one second, created through the API, fired by beat;
- ``--api-rate`` (5) more runs/s created through ``POST /api/tasks/<id>/execute``, paced by
  the clock (a late request does not shift the ones after it).

API throttling is lifted for the run (``TASKS_API_RATE_*``): the point is the stack, not the
rate limiter. At the end it waits (up to 120 s) for the created runs to finish, stops the
stack with SIGINT as Ctrl-C would, and counts:

- ``exits``: web, worker, beat or Postgres processes that ended before the stop;
- ``lost``: fires missing from a schedule (a second with no run between its task's first and
  last fire) plus runs (fired or created with a 202) that did not complete; at the end the
  schedules are paused through the API, and the fires that pause skipped are not counted;
- ``duplicated``: runs whose completion the worker logged more than once (the effect ran
  twice), from the ``execute_run[<id>] succeeded ... 'completed'`` lines;
- request errors and latencies per endpoint, start lateness of the runs (Postgres'
  ``lateness_ms``), and whether the launcher stopped cleanly (exit status 0).

Writes ``bench/results/hammer.json`` and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from project.embedded import alive

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "hammer.json"
PASSWORD = "hammer-password-not-secret"
TASK_ID = "hammer-echo"
SCHEDULED_PREFIX = "hammer-every-1s-"
COMPLETED = re.compile(r"execute_run\[([0-9a-f-]{36})\] succeeded in [^:]*: \{[^}]*'completed'")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p99": None, "max": None}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

    return {"p50": at(0.5), "p99": at(0.99), "max": round(ordered[-1], 1)}


class Client:
    def __init__(self, base: str, token: str) -> None:
        self.base = base
        self.headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, payload: Any = None) -> tuple[int, Any, float]:
        request = urllib.request.Request(  # noqa: S310 - the local stack
            self.base + path,
            method=method,
            data=None if payload is None else json.dumps(payload).encode(),
            headers=self.headers,
        )
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                body = response.read()
                status = response.status
        except urllib.error.HTTPError as exc:
            body, status = exc.read(), exc.code
        except OSError:
            return 0, None, (time.monotonic() - started) * 1000
        elapsed = (time.monotonic() - started) * 1000
        try:
            return status, json.loads(body or b"null"), elapsed
        except ValueError:
            return status, None, elapsed


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latency: dict[str, list[float]] = {}
        self.status: dict[str, Counter[int]] = {}
        self.run_ids: list[str] = []
        self.down: Counter[str] = Counter()

    def add(self, name: str, status: int, ms: float) -> None:
        with self.lock:
            self.latency.setdefault(name, []).append(ms)
            self.status.setdefault(name, Counter())[status] += 1


def stack_env(var: Path, port: int) -> dict[str, str]:
    """Nothing of the caller's services: the launcher must start the embedded ones."""
    return {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": os.environ.get("HOME", "/root"),
        "PORT": str(port),
        "TASKS_VAR_DIR": str(var),
        "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
        "TASKS_API_RATE_USER": "100000000/minute",
        "TASKS_API_RATE_ANON": "100000000/minute",
    }


def start_stack(var: Path, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    env = stack_env(var, port)
    return subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "project.embedded", "run"],
        cwd=ROOT,
        env=env,
        stdout=log_path.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def token_for_admin(var: Path, port: int) -> str:
    out = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "project.embedded", "manage", "api_token", "create", "admin"],
        cwd=ROOT,
        env=stack_env(var, port),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    token = out.strip()
    if not re.fullmatch(r"[0-9a-f]{64}", token):
        raise RuntimeError(f"no token in: {out}")
    return token


def hammer(minutes: float, rate: float, api_rate: float, readers: int) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="hammer-"))
    var = workdir / "var"
    port = free_port()
    log_path = workdir / "stack.log"
    stack = start_stack(var, port, log_path)
    base = f"http://127.0.0.1:{port}"
    result: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "minutes": minutes,
        "scheduled_runs_per_s": rate,
        "api_runs_per_s": api_rate,
        "readers": readers,
    }
    try:
        deadline = time.monotonic() + 240
        pids: dict[str, int] = {}
        while len(pids) < 4:
            text = log_path.read_text(errors="replace")
            pids = {n: int(p) for n, p in re.findall(r"(web|worker|beat|Postgres) pid (\d+)", text)}
            if stack.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the stack did not start:\n{text[-3000:]}")
            time.sleep(0.5)
        client = Client(base, "")
        while client.call("GET", "/admin/login/")[0] != 200:
            if stack.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("web never answered")
            time.sleep(0.5)
        client = Client(base, token_for_admin(var, port))
        status, body, _ = client.call(
            "POST",
            "/api/tasks",
            {"id": TASK_ID, "name": "Hammer", "action": "echo", "payload": {"message": "hi"}},
        )
        if status != 201:
            raise RuntimeError(f"creating the task: {status} {body}")
        scheduled = [f"{SCHEDULED_PREFIX}{n:03d}" for n in range(int(rate))]
        for task_id in scheduled:
            status, body, _ = client.call(
                "POST",
                "/api/tasks",
                {
                    "id": task_id,
                    "action": "echo",
                    "payload": {"message": task_id},
                    "schedule_type": "interval",
                    "interval_seconds": 1,
                },
            )
            if status != 201:
                raise RuntimeError(f"creating {task_id}: {status} {body}")

        stats = Stats()
        stop = threading.Event()
        exits: dict[str, float] = {}
        began = time.monotonic()
        seconds = minutes * 60

        def reader(index: int) -> None:
            paths = ["/api/health", "/api/tasks"]
            n = index
            while not stop.is_set():
                path = paths[n % 2]
                status, body, ms = client.call("GET", path)
                stats.add(f"GET {path}", status, ms)
                if status == 503 and isinstance(body, dict):
                    with stats.lock:
                        stats.down.update(str(name) for name in body.get("down", []))
                n += 1

        creators = 2 if api_rate else 0

        def creator(index: int) -> None:
            slot = index
            while not stop.is_set():
                due = began + slot / api_rate
                pause = due - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                if stop.is_set():
                    return
                status, body, ms = client.call("POST", f"/api/tasks/{TASK_ID}/execute")
                stats.add("POST execute", status, ms)
                if status == 202 and isinstance(body, dict) and body.get("id"):
                    with stats.lock:
                        stats.run_ids.append(str(body["id"]))
                slot += creators

        threads = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(readers)]
        threads += [
            threading.Thread(target=creator, args=(i,), daemon=True) for i in range(creators)
        ]
        for thread in threads:
            thread.start()
        while time.monotonic() - began < seconds:
            for name, pid in pids.items():
                if name not in exits and not alive(pid):
                    exits[name] = round(time.monotonic() - began, 1)
            time.sleep(1)
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        load_seconds = time.monotonic() - began
        for task_id in scheduled:
            status, body, _ = client.call("POST", f"/api/tasks/{task_id}/pause", {"note": "end"})
            if status != 200:
                raise RuntimeError(f"pausing {task_id}: {status} {body}")

        socket_dir = var / "postgres"

        def query(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
            with psycopg.connect(host=str(socket_dir), user="postgres", dbname="tasks") as db:
                return db.execute(sql, params).fetchall()

        # Every run that counts: those created through the API, and the schedules' fires
        # except those the final pause skipped.
        counted = (
            "(id = ANY(%s::uuid[]) OR (task_id LIKE %s AND NOT "
            "(status = 'skipped' AND error = 'skipped: task paused')))"
        )
        params: list[Any] = [list(stats.run_ids), f"{SCHEDULED_PREFIX}%"]

        def statuses() -> Counter[str]:
            rows = query(
                f"SELECT status, count(*) FROM tasks_app_run WHERE {counted} GROUP BY 1", params
            )  # noqa: S608
            return Counter({status: count for status, count in rows})

        drain_deadline = time.monotonic() + 120
        counts = statuses()
        while counts["completed"] < counts.total() and time.monotonic() < drain_deadline:
            time.sleep(2)
            counts = statuses()
        lateness = [
            float(value)
            for (value,) in query(
                f"SELECT lateness_ms FROM tasks_app_run WHERE {counted} AND lateness_ms IS NOT NULL",  # noqa: S608
                params,
            )
        ]
        # A missing fire: a second between a schedule's first and last counted fire with no run.
        missing_fires = sum(
            int(span) + 1 - fires
            for span, fires in query(
                f"SELECT extract(epoch FROM max(scheduled_for) - min(scheduled_for)), count(*) "  # noqa: S608
                f"FROM tasks_app_run WHERE {counted} AND task_id LIKE %s GROUP BY task_id",
                [*params, f"{SCHEDULED_PREFIX}%"],
            )
        )
        for name, pid in pids.items():
            if name not in exits and not alive(pid):
                exits[name] = round(time.monotonic() - began, 1)

        log_text = log_path.read_text(errors="replace")
        completions = Counter(COMPLETED.findall(log_text))
        result.update(
            {
                "load_seconds": round(load_seconds, 1),
                "runs": counts.total(),
                "runs_per_s": round(counts.total() / load_seconds, 1),
                "runs_created_through_api": len(stats.run_ids),
                "runs_by_status": dict(counts),
                "missing_fires": missing_fires,
                "lost": missing_fires + counts.total() - counts["completed"],
                "duplicated": sum(1 for n in completions.values() if n > 1),
                "completions_logged": sum(completions.values()),
                "exits": len(exits),
                "exited": exits,
                "start_lateness_ms": percentiles(lateness),
                "requests": {
                    name: {
                        "count": len(values),
                        "per_s": round(len(values) / load_seconds, 1),
                        "status": dict(stats.status[name]),
                        "latency_ms": percentiles(values),
                    }
                    for name, values in sorted(stats.latency.items())
                },
                "health_503_down_checks": dict(stats.down),
                "tracebacks_in_logs": log_text.count("Traceback"),
            }
        )
    finally:
        if stack.poll() is None:
            os.killpg(stack.pid, signal.SIGINT)
            stack.wait()
        log_text = log_path.read_text(errors="replace")
        result["stack_exit_status"] = stack.returncode
        result["stopped_cleanly"] = "embedded | stopped cleanly" in log_text
        kept = Path(tempfile.gettempdir()) / "hammer-stack.log"
        shutil.copy(log_path, kept)
        result["stack_log"] = str(kept)
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument(
        "--rate", type=int, default=50, help="scheduled runs per second (tasks every 1 s)"
    )
    parser.add_argument(
        "--api-rate", type=float, default=5.0, help="runs per second created through the API"
    )
    parser.add_argument("--readers", type=int, default=8)
    args = parser.parse_args()
    result = hammer(args.minutes, args.rate, args.api_rate, args.readers)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
