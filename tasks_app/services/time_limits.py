"""How long a run may take, and the error that says it took longer. When a failed run is
tried again is ``timing.policies.retry_after``'s."""

from __future__ import annotations

from ..conf import app_settings
from ..models import Task


def run_timeout_seconds(task: Task) -> int:
    """The task's time limit (the soft limit; the hard limit is a few seconds later)."""
    return int(task.timeout_seconds or app_settings.DEFAULT_TIMEOUT_SECONDS)


def timed_out_error(task: Task, detail: str = "") -> str:
    text = f"timed out after {run_timeout_seconds(task)} s"
    return f"{text} ({detail})" if detail else text
