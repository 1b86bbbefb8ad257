"""Backoff and time-limit wording (pure: an unsaved task is enough)."""

from datetime import timedelta

from tasks_app.models import Task
from tasks_app.services.retry_policy import (
    MAX_RETRY_DELAY_SECONDS,
    retry_delay,
    timed_out_error,
)


def test_backoff_doubles_per_attempt_with_jitter_on_its_upper_half() -> None:
    task = Task(retry_backoff_seconds=10)
    for attempt, base in ((1, 10), (2, 20), (3, 40)):
        delays = [retry_delay(task, attempt=attempt) for _ in range(50)]
        assert all(timedelta(seconds=base / 2) <= d <= timedelta(seconds=base) for d in delays)
        assert len(set(delays)) > 1  # jittered, so retries of many runs do not align


def test_backoff_is_capped_at_an_hour() -> None:
    task = Task(retry_backoff_seconds=600)
    assert retry_delay(task, attempt=20) <= timedelta(seconds=MAX_RETRY_DELAY_SECONDS)


def test_timeout_error_names_the_limit_and_the_detail() -> None:
    assert timed_out_error(Task(timeout_seconds=30)) == "timed out after 30 s"
    assert (
        timed_out_error(Task(timeout_seconds=30), "killed at the hard limit")
        == "timed out after 30 s (killed at the hard limit)"
    )
