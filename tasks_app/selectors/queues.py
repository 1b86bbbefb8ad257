"""The queues and their pauses: which are paused, and how many runs wait in each."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count

from ..models import QueuePause, Run, RunStatus, run_queue
from ..vocabulary import validation


@dataclass(frozen=True)
class QueueState:
    """One queue as the admin, the API and the CLI show it."""

    name: str
    paused: bool
    paused_at: datetime | None
    paused_by: str
    note: str
    waiting: int  # runs pending or queued on it


def paused_queues() -> set[str]:
    """The names of the paused queues, read from the database (their pause rows)."""
    return set(QueuePause.objects.values_list("queue", flat=True))


def waiting_runs(queues: list[str] | None = None) -> dict[str, int]:
    """Runs waiting (``pending`` or ``queued``) per queue, of ``queues`` (all when ``None``)."""
    rows = (
        Run.objects.filter(status__in=[RunStatus.PENDING, RunStatus.QUEUED])
        .annotate(on_queue=run_queue())
        .order_by()
        .values("on_queue")
        .annotate(n=Count("id"))
    )
    if queues is not None:
        rows = rows.filter(on_queue__in=queues)
    return {row["on_queue"]: row["n"] for row in rows}


def queue_list() -> list[QueueState]:
    """Every known queue by name: those ``TASKS_QUEUES`` configures, and any other that is
    paused (a queue paused, then removed from the setting, can still be resumed)."""
    pauses = {p.queue: p for p in QueuePause.objects.all()}
    names = sorted(set(validation.configured_queues()) | set(pauses))
    waiting = waiting_runs(names)
    return [
        QueueState(
            name=name,
            paused=name in pauses,
            paused_at=pauses[name].paused_at if name in pauses else None,
            paused_by=pauses[name].paused_by if name in pauses else "",
            note=pauses[name].note if name in pauses else "",
            waiting=waiting.get(name, 0),
        )
        for name in names
    ]


def queue_state(name: str) -> QueueState:
    """The queue ``name`` as :func:`queue_list` shows it (known or not: not paused then)."""
    pause = QueuePause.objects.filter(queue=name).first()
    return QueueState(
        name=name,
        paused=pause is not None,
        paused_at=pause.paused_at if pause else None,
        paused_by=pause.paused_by if pause else "",
        note=pause.note if pause else "",
        waiting=waiting_runs([name]).get(name, 0),
    )
