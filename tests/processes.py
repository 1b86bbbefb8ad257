"""Real ``celery worker`` / ``celery beat`` / web processes for end-to-end tests.

They run against the test database (the one pytest-django created), the real broker and a
queue unique to this test session, so parallel sessions and leftovers never mix.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.db import connection

from tests import installed
from tests.installed import InstalledProject

ROOT = Path(__file__).resolve().parent.parent
# Every process a test session spawned, so a failing test's report can show their logs.
SPAWNED: list[Proc] = []


def wait_until(
    predicate: Callable[[], Any],
    *,
    timeout: float,
    interval: float = 0.1,
    message: str = "condition",
) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message}")
        time.sleep(interval)


def wait_for_beat_after(instant: datetime, *, timeout: float = 30) -> None:
    """Wait until beat has ticked after ``instant`` (its heartbeat in the cache): whatever
    beat would do about the state as of ``instant`` (fire, release, sweep), it has done.
    The condition that closes a window in which something must *not* happen."""
    from tasks_app.observability.health import last_beat_tick

    wait_until(
        lambda: (tick := last_beat_tick()) is not None and tick > instant,
        timeout=timeout,
        message=f"a beat tick after {instant.isoformat()}",
    )


def delete_queue(name: str) -> None:
    """Delete a broker queue a test session created, and its due lane; nothing for one that
    was never declared."""
    from project.celery import app
    from tasks_app.messaging.queues import lane

    for queue in (name, lane(name)):
        try:
            with app.connection_for_write() as conn:
                conn.default_channel.queue_delete(queue)
        except Exception:  # never declared (or the broker is away: nothing left to clean)
            pass


def server_url(dbname: str) -> str:
    """The URL of database ``dbname`` on the test database's server, as its user."""
    cfg = connection.settings_dict
    user = cfg.get("USER") or ""
    password = f":{cfg['PASSWORD']}" if cfg.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    return f"postgres://{auth}{cfg.get('HOST') or '127.0.0.1'}:{cfg.get('PORT') or 5432}/{dbname}"


def test_database_url() -> str:
    return server_url(connection.settings_dict["NAME"])


def ensure_vhost(url: str) -> None:
    """Make the RabbitMQ vhost of broker ``url`` (and its user's permissions) if missing."""
    parts = urlsplit(url)
    vhost, user = parts.path.lstrip("/") or "/", parts.username or "guest"
    listed = subprocess.run(
        ["rabbitmqctl", "-q", "list_vhosts"], capture_output=True, text=True, check=False
    )
    if vhost in listed.stdout.split():
        return
    subprocess.run(["rabbitmqctl", "-q", "add_vhost", vhost], check=True)
    subprocess.run(
        ["rabbitmqctl", "-q", "set_permissions", "-p", vhost, user, ".*", ".*", ".*"], check=True
    )


def process_env(**extra: str) -> dict[str, str]:
    env = os.environ.copy()
    env["DATABASE_URL"] = test_database_url()
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


_installed: InstalledProject | None = None


def installed_project() -> InstalledProject:
    """The session's project laid out by docs/install.md, from the wheel (built on first use)."""
    global _installed
    if _installed is None:
        _installed = installed.build(Path(tempfile.mkdtemp(prefix="installed-project-")))
    return _installed


def celery_process(
    name: str, args: list[str], log_dir: Path, *, shape: str, env: dict[str, str]
) -> Proc:
    """``celery <args>`` of the installed project (``shape="installed"``: its ``shop`` app,
    from its folder) or of the demo project (``"demo"``), on the session's services."""
    environment = process_env(**env)
    if shape == "demo":
        return spawn(
            name, [sys.executable, "-m", "celery", "-A", "project", *args], log_dir, environment
        )
    project = installed_project()
    environment.update(
        project.env(test_database_url(), environment["CELERY_BROKER_URL"], environment["REDIS_URL"])
    )
    environment.update(env)
    command = [sys.executable, "-m", "celery", "-A", installed.NAME, *args]
    return spawn(name, command, log_dir, environment, cwd=project.root)


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    stopped: bool = field(default=False)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, text: str, timeout: float = 30) -> None:
        wait_until(
            lambda: text in self.log() or self.popen.poll() is not None,
            timeout=timeout,
            message=f"{self.name} to log {text!r}",
        )
        if text not in self.log():
            raise AssertionError(f"{self.name} exited early:\n{self.log()[-3000:]}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, sig)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(10)
        self.stopped = True

    def kill(self) -> None:
        """SIGKILL the whole process group (the main process and its pool children)."""
        self.stop(signal.SIGKILL)


def spawn(
    name: str, args: list[str], log_dir: Path, env: dict[str, str], *, cwd: Path = ROOT
) -> Proc:
    """Start ``args`` in a session of its own (so :meth:`Proc.stop` reaches its children),
    its output in a log file under ``log_dir``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}-{time.time_ns()}.log"
    handle = log_path.open("wb")
    popen = subprocess.Popen(
        args, cwd=cwd, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
    )
    proc = Proc(name=name, popen=popen, log_path=log_path)
    SPAWNED.append(proc)
    return proc


def logs_written_since(started: float, *, tail: int = 4000) -> list[tuple[str, str]]:
    """``(title, last characters)`` of each spawned process's log that is still running or
    was written to after ``started`` (``time.time()``): what a failing test's report shows
    of the real processes."""
    sections = []
    for proc in SPAWNED:
        try:
            if proc.popen.poll() is not None and proc.log_path.stat().st_mtime < started:
                continue
            text = proc.log()
        except OSError:
            continue
        state = "running" if proc.popen.poll() is None else f"exited {proc.popen.returncode}"
        sections.append((f"{proc.name} log ({proc.log_path.name}, {state})", text[-tail:]))
    return sections


def start_worker(
    log_dir: Path,
    *,
    concurrency: int = 2,
    pool: str = "prefork",
    hostname: str | None = None,
    shape: str = "installed",
    **env: str,
) -> Proc:
    """A real worker of the installed project (``shape="demo"``: of the demo project)."""
    args = [
        "worker",
        "-l",
        "info",
        "--pool",
        pool,
        "--concurrency",
        str(concurrency),
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "-n",
        hostname or f"test-{time.time_ns()}@%h",
    ]
    proc = celery_process("worker", args, log_dir, shape=shape, env=env)
    proc.wait_for_log("ready.", timeout=60)
    return proc


def start_beat(
    log_dir: Path, *, scheduler: str | None = None, shape: str = "installed", **env: str
) -> Proc:
    """``celery beat`` with the app's scheduler, or ``scheduler`` (a class path, e.g.
    stock ``django_celery_beat.schedulers:DatabaseScheduler`` to compare with), of the
    installed project (``shape="demo"``: of the demo project)."""
    args = [
        "beat",
        "-l",
        "info",
        "--pidfile",
        str(log_dir / f"beat-{time.time_ns()}.pid"),
        *(["--scheduler", scheduler] if scheduler else []),
    ]
    proc = celery_process("beat", args, log_dir, shape=shape, env=env)
    proc.wait_for_log("beat: Starting", timeout=60)
    return proc


def start_web(log_dir: Path, *, port: int | None = None, **env: str) -> tuple[Proc, str]:
    """The Procfile's web process (``gunicorn project.wsgi``, one worker) of the demo
    project, on the session's services and a free port; ``(process, base URL)`` once it
    answers ``/api/health`` (any status: a test may start it before beat or a worker)."""
    from tests.web import free_port

    port = port or free_port()
    base = f"http://127.0.0.1:{port}"
    environment = process_env(
        PORT=str(port),
        HOST="127.0.0.1",
        WEB_CONCURRENCY="1",
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        **env,
    )
    command = [sys.executable, "-m", "gunicorn", "project.wsgi", "-c", "project/gunicorn.conf.py"]
    proc = spawn("web", command, log_dir, environment)

    def answers() -> bool:
        if proc.popen.poll() is not None:
            raise AssertionError(f"web exited early:\n{proc.log()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{base}/api/health", timeout=5):  # noqa: S310 - local
                return True
        except urllib.error.HTTPError:
            return True  # 503: it answers
        except OSError:
            return False

    wait_until(answers, timeout=60, interval=0.3, message="web to answer /api/health")
    return proc, base
