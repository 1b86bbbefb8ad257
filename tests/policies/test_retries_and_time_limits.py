"""Retries' backoff and the time-limit wording (pure: an unsaved task is enough)."""

from datetime import timedelta

from tasks_app.models import Task
from tasks_app.services.time_limits import timed_out_error
from tasks_app.timing.policies import MAX_RETRY_DELAY_SECONDS, retry_after


def retry_delay(task: Task, *, attempt: int) -> timedelta | None:
    return retry_after(
        attempt=attempt,
        interruptions=0,
        max_retries=99,
        backoff_seconds=task.retry_backoff_seconds,
    )


def test_backoff_doubles_per_attempt_with_jitter_on_its_upper_half() -> None:
    task = Task(retry_backoff_seconds=10)
    for attempt, base in ((1, 10), (2, 20), (3, 40)):
        delays = [retry_delay(task, attempt=attempt) for _ in range(50)]
        assert all(timedelta(seconds=base / 2) <= d <= timedelta(seconds=base) for d in delays)
        assert len(set(delays)) > 1  # jittered, so retries of many runs do not align


def test_backoff_is_capped_at_an_hour() -> None:
    task = Task(retry_backoff_seconds=600)
    delay = retry_delay(task, attempt=20)
    assert delay is not None and delay <= timedelta(seconds=MAX_RETRY_DELAY_SECONDS)


def test_an_attempt_past_max_retries_is_not_retried_and_interruptions_do_not_count() -> None:
    ask = {"max_retries": 2, "backoff_seconds": 1}
    assert retry_after(attempt=2, interruptions=0, **ask) is not None  # the 2nd retry next
    assert retry_after(attempt=3, interruptions=0, **ask) is None  # 3 attempts: no more
    assert retry_after(attempt=3, interruptions=1, **ask) is not None  # one was cut off


def test_timeout_error_names_the_limit_and_the_detail() -> None:
    assert timed_out_error(Task(timeout_seconds=30)) == "timed out after 30 s"
    assert (
        timed_out_error(Task(timeout_seconds=30), "killed at the hard limit")
        == "timed out after 30 s (killed at the hard limit)"
    )
