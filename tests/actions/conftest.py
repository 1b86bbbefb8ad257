"""Fixtures for the action tests: a local webhook listener and a worker on its own queue.

The worker gets the loopback allowance, an exec allow-list and a fake secret through its
environment (the only way settings reach another process), and consumes a queue of its own,
so it never takes runs meant for the session's default worker and vice versa.
"""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.processes import Proc, delete_queue, start_worker

LOOPBACK_ONLY = "127.0.0.1/32"
WORKER_EXEC_ALLOWLIST = ["echo", "env", "printenv", "cat"]
CELERY_TASK_PATTERNS = ["tests.effects.tasks.*"]  # the test app's Celery tasks


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Listener:
    """A real HTTP server on 127.0.0.1 that answers from a script and records everything."""

    server: ThreadingHTTPServer
    replies: list[tuple[int, dict[str, str], bytes]] = field(default_factory=list)
    requests: list[Received] = field(default_factory=list)
    connections: int = 0
    delay: float = 0.0

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def reply(
        self, status: int, body: bytes | str = b"", headers: dict[str, str] | None = None
    ) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.replies.append((status, headers or {}, data))


@pytest.fixture
def listener() -> Iterator[Listener]:
    state: dict[str, Listener] = {}

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            me = state["listener"]
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            me.requests.append(Received(self.command, self.path, dict(self.headers.items()), body))
            if me.delay:
                threading.Event().wait(me.delay)
            status, headers, data = me.replies.pop(0) if me.replies else (200, {}, b"ok")
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def get_request(self) -> tuple[socket.socket, Any]:
            conn = super().get_request()
            state["listener"].connections += 1
            return conn

    server = Server(("127.0.0.1", 0), Handler)
    state["listener"] = Listener(server=server)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield state["listener"]
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def secret_token() -> str:
    return f"tok-{uuid.uuid4().hex}"


@pytest.fixture(scope="session")
def actions_queue(_session_queue: str) -> Iterator[str]:
    queue = f"{_session_queue}-actions"
    yield queue
    delete_queue(queue)


@pytest.fixture(scope="session")
def actions_worker(actions_queue: str, process_logs: Path, secret_token: str) -> Iterator[Proc]:
    """A real worker with loopback webhooks allowed, ``echo``/``env``/``printenv``/``cat``
    allowed for exec, the test app's Celery tasks allowed, and a secret-looking variable in its own environment."""
    proc = start_worker(
        process_logs,
        TASKS_DEFAULT_QUEUE=actions_queue,
        TASKS_HTTP_ALLOWED_NETWORKS=LOOPBACK_ONLY,
        TASKS_EXEC_ALLOWLIST=",".join(WORKER_EXEC_ALLOWLIST),
        TASKS_CELERY_TASKS=",".join(CELERY_TASK_PATTERNS),
        PAYMENTS_API_TOKEN=secret_token,
    )
    yield proc
    proc.stop()
