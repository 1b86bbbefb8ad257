"""Postgres, RabbitMQ and Redis instances of the soak's own (``SOAK_PRIVATE_SERVICES=1``),
on ports of their own under a temporary directory, so the soak can restart them without
touching the shared services of the machine (5432 / 5672 / 6379).

Postgres and RabbitMQ refuse to run as root: as root they run as the ``postgres`` and
``rabbitmq`` system users (the Debian packages' binaries).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.soak.harness import free_port

PG_BIN = Path(os.environ.get("SOAK_PG_BIN", "/usr/lib/postgresql/15/bin"))
RABBIT_BIN = Path(os.environ.get("SOAK_RABBITMQ_BIN", "/usr/lib/rabbitmq/bin"))
SHARED_NODE = "rabbit@localhost"
OUTAGE_SECONDS = 5.0


def _as(user: str) -> list[str]:
    return ["runuser", "-u", user, "--"] if os.geteuid() == 0 else []


def _wait_port(port: int, timeout: float) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout:.0f} s")


@dataclass
class PrivateServices:
    base: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="soak-services-")))
    pg_port: int = field(default_factory=free_port)
    amqp_port: int = field(default_factory=free_port)
    redis_port: int = field(default_factory=free_port)
    redis: subprocess.Popen[bytes] | None = None
    rabbit: subprocess.Popen[bytes] | None = None

    @property
    def node(self) -> str:
        return f"soak{self.amqp_port}@localhost"

    @property
    def urls(self) -> dict[str, str]:
        return {
            "SOAK_DATABASE_URL": f"postgres://root@127.0.0.1:{self.pg_port}/tasks_soak",
            "SOAK_BROKER_URL": f"amqp://soak:soak@127.0.0.1:{self.amqp_port}//",
            "SOAK_REDIS_URL": f"redis://127.0.0.1:{self.redis_port}/0",
        }

    # -- Postgres ------------------------------------------------------------------------

    def _pg_ctl(self, *args: str) -> None:
        data = self.base / "pg"
        subprocess.run(
            [*_as("postgres"), str(PG_BIN / "pg_ctl"), "-D", str(data), "-w", "-t", "60", *args],
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def start_postgres(self) -> None:
        data = self.base / "pg"
        data.mkdir(parents=True)
        if os.geteuid() == 0:
            shutil.chown(self.base, "postgres")
            shutil.chown(data, "postgres")
        subprocess.run(
            [*_as("postgres"), str(PG_BIN / "initdb"), "-D", str(data), "-U", "root"]
            + ["--auth=trust", "-E", "UTF8"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        opts = f"-p {self.pg_port} -c listen_addresses=127.0.0.1 -k {data}"
        self._pg_ctl("-o", opts, "-l", str(data / "log"), "start")

    # -- RabbitMQ ------------------------------------------------------------------------

    def _rabbit_env(self) -> dict[str, str]:
        rdir = self.base / "rabbit"
        return {
            **os.environ,
            "HOME": "/var/lib/rabbitmq",  # the system user's Erlang cookie
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_PORT": str(self.amqp_port),
            "RABBITMQ_DIST_PORT": str(free_port()),
            "RABBITMQ_MNESIA_BASE": str(rdir / "mnesia"),
            "RABBITMQ_LOG_BASE": str(rdir / "log"),
            "RABBITMQ_CONFIG_FILE": str(rdir / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(rdir / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(rdir / "pid"),
        }

    def rabbitmqctl(self, *args: str, quiet: bool = False) -> None:
        assert self.node != SHARED_NODE
        subprocess.run(
            [*_as("rabbitmq"), str(RABBIT_BIN / "rabbitmqctl"), "-q", "-n", self.node, *args],
            check=True,
            env=self._rabbit_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL if quiet else None,
        )

    def start_rabbitmq(self) -> None:
        rdir = self.base / "rabbit"
        rdir.mkdir(parents=True)
        (rdir / "rabbitmq.conf").write_text(
            f"listeners.tcp.1 = 127.0.0.1:{self.amqp_port}\nloopback_users = none\n"
        )
        (rdir / "enabled_plugins").write_text("[].\n")
        if os.geteuid() == 0:
            subprocess.run(["chown", "-R", "rabbitmq", str(rdir)], check=True)
            os.chmod(self.base, 0o755)
        self._run_rabbitmq()
        self.rabbitmqctl("add_user", "soak", "soak")
        self.rabbitmqctl("set_permissions", "-p", "/", "soak", ".*", ".*", ".*")

    def _run_rabbitmq(self) -> None:
        """Start the node on its data directory and wait until it serves (users, vhosts,
        durable queues and their messages survive from a previous start)."""
        log = (self.base / "rabbit-server.log").open("ab")
        self.rabbit = subprocess.Popen(
            [*_as("rabbitmq"), str(RABBIT_BIN / "rabbitmq-server")],
            env=self._rabbit_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while True:  # await_startup needs the node up in epmd first
            try:
                self.rabbitmqctl("await_startup", "--timeout", "120", quiet=True)
                break
            except subprocess.CalledProcessError:
                if time.monotonic() > deadline or self.rabbit.poll() is not None:
                    log = (self.base / "rabbit-server.log").read_text(errors="replace")
                    raise RuntimeError(f"the soak's RabbitMQ did not start:\n{log[-2000:]}")
                time.sleep(1)

    # -- Redis ---------------------------------------------------------------------------

    def start_redis(self) -> None:
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1"]
            + ["--save", "", "--appendonly", "no", "--dir", str(self.base)],
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        _wait_port(self.redis_port, 30)

    # -- the whole set -------------------------------------------------------------------

    def start(self) -> None:
        self.start_postgres()
        self.start_redis()
        self.start_rabbitmq()

    def restart(self, kind: str) -> None:
        """The service faults the soak draws; each returns once the service is back."""
        if kind == "rabbitmq_app_restart":
            self.rabbitmqctl("stop_app")
            time.sleep(OUTAGE_SECONDS)
            self.rabbitmqctl("start_app")
        elif kind == "rabbitmq_restart":  # the whole node: the Erlang VM stops and starts
            assert self.rabbit is not None
            self.rabbitmqctl("stop")
            self.rabbit.wait(60)
            time.sleep(OUTAGE_SECONDS)
            self._run_rabbitmq()
        elif kind == "postgres_restart":
            self._pg_ctl("-m", "fast", "restart")
        elif kind == "redis_restart":
            assert self.redis is not None
            self.redis.terminate()
            self.redis.wait(30)
            time.sleep(OUTAGE_SECONDS)
            self.start_redis()
        else:
            raise ValueError(f"unknown service fault {kind!r}")

    def stop(self) -> None:
        if self.rabbit is not None:
            try:
                self.rabbitmqctl("shutdown")
            except subprocess.CalledProcessError:
                pass
            try:
                self.rabbit.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.rabbit.pid, 9)
        if self.redis is not None:
            self.redis.terminate()
            self.redis.wait(30)
        if (self.base / "pg" / "postmaster.pid").exists():
            self._pg_ctl("-m", "immediate", "stop")
        shutil.rmtree(self.base, ignore_errors=True)
