"""Fault-injection fixtures: real workers and beat with a short lease, and the figures each
test reports (runs, lost, duplicated, recovery seconds), printed at the end of the session."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import InterfaceError, OperationalError, connection
from rest_framework.test import APIClient

from tasks_app.services.tokens import token_create
from tests.processes import Proc

# Short windows so a lost worker is noticed in seconds (production defaults: 10 s / 60 s).
FAULT_ENV = {
    "TASKS_HEARTBEAT_SECONDS": "0.5",
    "TASKS_STALL_SECONDS": "3",
    "TASKS_DB_RETRY_SECONDS": "30",
}
STALL_SECONDS = float(FAULT_ENV["TASKS_STALL_SECONDS"])

_FIGURES: list[dict[str, Any]] = []
StartProc = Callable[..., Proc]
Figures = Callable[..., None]


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Callable[..., None]:
    """``figures(runs=..., lost=..., ...)`` records this test's figures for the summary."""

    def record(**values: Any) -> None:
        _FIGURES.append({"test": request.node.name, **values})

    return record


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _FIGURES:
        return
    terminalreporter.section("fault-injection figures")
    for entry in _FIGURES:
        terminalreporter.write_line(json.dumps(entry, default=str))


@pytest.fixture
def fault_worker(worker_factory: Callable[..., Proc]) -> Callable[..., Proc]:
    """Start workers for a fault test, on a session queue emptied first: a fire recorded
    ahead by an earlier module's beat may have gone back to the queue when that module's
    worker stopped, and these tests count what the queue holds."""
    from django.conf import settings

    from project.celery import app

    with app.connection_for_write() as conn:
        try:
            conn.default_channel.queue_purge(settings.CELERY_TASK_DEFAULT_QUEUE)
        except conn.channel_errors:  # not declared yet: nothing in it
            pass

    def start(**kwargs: Any) -> Proc:
        return worker_factory(**{**FAULT_ENV, **kwargs})

    return start


@pytest.fixture
def fault_beat(beat_factory: Callable[..., Proc]) -> Callable[..., Proc]:
    def start(**env: str) -> Proc:
        return beat_factory(**{**FAULT_ENV, **env})

    return start


def db_retry(fn: Callable[[], Any], *, timeout: float = 60) -> Any:
    """Call ``fn``, reconnecting while the database restarts (the test's own connection)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except (OperationalError, InterfaceError):
            connection.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


@pytest.fixture
def api() -> APIClient:
    """The REST API as an operator with a token (DRF's test client, in-process)."""
    user = get_user_model().objects.create_superuser("ops", "ops@example.com", "pw-not-used")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user).token}")
    return client
