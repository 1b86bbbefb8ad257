"""How values read as text, for every way in that shows them to a person (the admin's pages,
the CLI's tables): instants, relative times, durations, schedules. Plain text only; the
admin wraps these in its HTML (``admin/views.py``: ``<time>`` elements, status badges), the
API answers ISO 8601 and numbers instead.

Pure: no queries, no clock reads (``relative`` takes ``now``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from cron_descriptor import get_description

from ..timing import scheduling
from .choices import ScheduleType

if TYPE_CHECKING:
    from ..models import Task

INSTANT_FORMAT = "%Y-%m-%d %H:%M:%S"


def instant_text(value: datetime) -> str:
    """``2026-11-30 15:35:09 UTC``: an instant, to the second, in UTC."""
    return f"{value.astimezone(UTC):{INSTANT_FORMAT}} UTC"


def zoned_instant_text(moment: datetime) -> str:
    """A fire in its own zone, as :func:`instant_text` writes UTC, with the weekday."""
    return f"{moment:{INSTANT_FORMAT}} {moment.tzname()} ({moment:%a})"


def relative(value: datetime | None, now: datetime) -> str:
    """``in 4 min``, ``12 s ago``, ``now``; ``-`` for nothing."""
    if value is None:
        return "-"
    seconds = (value - now).total_seconds()
    size = abs(seconds)
    if size < 1:
        return "now"
    for unit, length in (("d", 86400), ("h", 3600), ("min", 60)):
        if size >= length:
            text = (
                f"{size / length:.0f} {unit}"
                if size / length >= 10
                else f"{size / length:.1f}".rstrip("0").rstrip(".") + f" {unit}"
            )
            break
    else:
        text = f"{size:.0f} s"
    return f"in {text}" if seconds > 0 else f"{text} ago"


def duration(ms: float | int | None) -> str:
    """Lateness and duration: ``850 ms``, ``2.40 s``, ``95.3 s``, ``1520 s``; ``-`` for none."""
    if ms is None:
        return "-"
    if abs(ms) < 1000:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    if abs(seconds) < 10:
        return f"{seconds:.2f} s"
    return f"{seconds:.1f} s" if abs(seconds) < 100 else f"{seconds:.0f} s"


def _seconds_in_words(seconds: int) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0 and seconds >= size:
            n = seconds // size
            return f"every {n} {unit}{'s' if n != 1 else ''}" if n != 1 else f"every {unit}"
    return f"every {seconds} seconds" if seconds != 1 else "every second"


def schedule_in_words(task: Task) -> str:
    """'At 09:00 AM, Monday through Friday (Europe/Paris)', 'Every 5 minutes', ... (a page)."""
    kind = task.schedule_type
    if kind == ScheduleType.CRON and task.cron:
        text = scheduling.expand_macro(task.cron.strip())
        try:
            words = get_description(text)
        except Exception:  # cron-descriptor refuses some forms the parser accepts
            words = f"cron {task.cron}"
        return f"{words} ({task.timezone or 'UTC'})"
    if kind == ScheduleType.INTERVAL and task.interval_seconds:
        return _seconds_in_words(task.interval_seconds).capitalize()
    if kind == ScheduleType.ONCE:
        return (
            f"Once, at {task.run_at:%Y-%m-%d %H:%M:%S %Z}" if task.run_at else "Once (no time set)"
        )
    return "On demand: no schedule, it runs when asked (Run now, a delay, the API, the CLI)"


def schedule_brief(task: Task) -> str:
    """``every 300 s``, ``cron 0 9 * * 1-5 (Europe/Paris)``, ``on demand``: a table's cell."""
    if task.schedule_type == ScheduleType.INTERVAL:
        return f"every {task.interval_seconds} s"
    if task.schedule_type == ScheduleType.CRON:
        return f"cron {task.cron} ({task.timezone})"
    if task.schedule_type == ScheduleType.ONCE:
        return f"once at {task.run_at.isoformat() if task.run_at else '?'}"
    return "on demand"


def flow_control_text(task: Task) -> str:
    """A task's flow control in words (``at most 2 at once, 1 per customer; 10/s``), or ''."""
    key = task.flow_key or "key"
    limits = [
        *([f"at most {task.concurrency_limit} at once"] if task.concurrency_limit else []),
        *(
            [f"{task.concurrency_limit_per_key} at once per {key}"]
            if task.concurrency_limit_per_key
            else []
        ),
        *([f"starts {task.rate_limit}"] if task.rate_limit else []),
        *([f"starts {task.rate_limit_per_key} per {key}"] if task.rate_limit_per_key else []),
    ]
    if not limits and task.flow_key:
        return f"runs keyed by {task.flow_key}"
    return "; ".join(limits)
