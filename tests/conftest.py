from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.processes import Proc, delete_queue, logs_written_since, start_beat, start_worker

_STARTED = pytest.StashKey[float]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failing test's report ends with the tail of every real process's log written to
    while it ran (workers, beats): a failure on CI says what the processes saw."""
    report = yield
    if call.when == "setup":
        item.stash[_STARTED] = call.start
    if report.failed and call.when in ("setup", "call"):
        for title, text in logs_written_since(item.stash.get(_STARTED, call.start)):
            report.sections.append((title, text))
    return report


@pytest.fixture(scope="session")
def process_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("process-logs")


@pytest.fixture(scope="session")
def _session_queue(django_db_setup: None) -> Iterator[str]:
    from django.conf import settings

    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    yield queue
    delete_queue(queue)


@pytest.fixture(scope="module")
def worker(_session_queue: str, django_db_blocker: object, process_logs: Path) -> Iterator[Proc]:
    """A real ``celery worker`` (prefork, 2 processes) shared by a module's e2e tests.

    Module-scoped so it is gone before modules that start, kill and time their own workers
    (tests/faults) run: a leftover worker would take their messages.
    """
    proc = start_worker(process_logs)
    yield proc
    proc.stop()


def _factory(starter: Callable[..., Proc], log_dir: Path) -> Iterator[Callable[..., Proc]]:
    started: list[Proc] = []

    def start(**kwargs: Any) -> Proc:
        proc = starter(log_dir, **kwargs)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture
def beat_factory(_session_queue: str, process_logs: Path) -> Iterator[Callable[..., Proc]]:
    """Start real ``celery beat`` processes; all are stopped when the test ends."""
    yield from _factory(start_beat, process_logs)


@pytest.fixture
def worker_factory(_session_queue: str, process_logs: Path) -> Iterator[Callable[..., Proc]]:
    """Start extra real workers (for tests that kill or stop them); stopped at test end."""
    yield from _factory(start_worker, process_logs)


@pytest.fixture
def extra_queue(
    _session_queue: str, request: pytest.FixtureRequest, settings: Any
) -> Iterator[str]:
    """A broker queue of this session that only the test's own worker consumes; deleted after.
    It is a configured queue (``TASKS_QUEUES``) for the test's own process."""
    from tasks_app.conf import app_settings

    name = f"{_session_queue}-{request.node.name[:40]}"
    settings.TASKS_QUEUES = [*app_settings.QUEUES, name]
    yield name
    delete_queue(name)
