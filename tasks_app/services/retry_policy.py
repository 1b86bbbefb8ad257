"""How long a run may take and when a failed one is tried again."""

from __future__ import annotations

import random
from datetime import timedelta

from ..conf import app_settings
from ..models import Task

MAX_RETRY_DELAY_SECONDS = 3600


def retry_delay(task: Task, *, attempt: int) -> timedelta:
    """Exponential backoff from ``retry_backoff_seconds``, capped, with full jitter on half."""
    base = task.retry_backoff_seconds * (2 ** (attempt - 1))
    capped = min(base, MAX_RETRY_DELAY_SECONDS)
    return timedelta(seconds=capped / 2 + random.uniform(0, capped / 2))  # noqa: S311


def run_timeout_seconds(task: Task) -> int:
    """The task's time limit (the soft limit; the hard limit is a few seconds later)."""
    return int(task.timeout_seconds or app_settings.DEFAULT_TIMEOUT_SECONDS)


def timed_out_error(task: Task, detail: str = "") -> str:
    text = f"timed out after {run_timeout_seconds(task)} s"
    return f"{text} ({detail})" if detail else text
