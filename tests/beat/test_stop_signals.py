"""``tasks_app.beat.scheduler.stop_deferred``: a stop of beat waits for the pass in progress, and
a second stop does not wait (the whole beat process: tests/faults/test_beat_stop.py)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from tasks_app.beat.scheduler import stop_deferred


@pytest.fixture
def handled() -> Iterator[list[int]]:
    """The signals that reached the process's own SIGTERM handler (Celery's, in beat)."""
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, _frame: seen.append(signum))
    yield seen
    signal.signal(signal.SIGTERM, previous)


def stop() -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.05)  # a handler runs between two bytecodes of the main thread: long done


def test_a_stop_reaches_the_handler_once_the_pass_is_done(handled: list[int]) -> None:
    with stop_deferred():
        stop()
        assert handled == []  # the pass goes on
    assert handled == [signal.SIGTERM]


def test_a_second_stop_reaches_the_handler_at_once(handled: list[int]) -> None:
    with stop_deferred():
        stop()
        stop()
        assert handled == [signal.SIGTERM]
    assert handled == [signal.SIGTERM]  # not delivered again after the pass
