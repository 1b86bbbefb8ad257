"""Helpers for the scale tests: recurring tasks written in bulk, leader detection in logs."""

from __future__ import annotations

from datetime import datetime, timedelta

from tasks_app.models import Run, Task, TaskState, TaskStatus, allow_status_writes
from tests.processes import Proc

LEADER_LOG = "beat leadership acquired"


def bulk_interval_tasks(
    prefix: str, count: int, *, every: int, first: datetime, queue: str | None = None
) -> list[Task]:
    """Recurring tasks written directly (no beat entry needed: beat fires from the task rows)."""
    extra = {"queue": queue} if queue else {}
    tasks = [
        Task(
            id=f"{prefix}-{i:05d}",
            action="noop",
            schedule_type="interval",
            interval_seconds=every,
            **extra,
        )
        for i in range(count)
    ]
    Task.objects.bulk_create(tasks)
    states = list(TaskState.objects.filter(task__id__startswith=f"{prefix}-").order_by("task_id"))
    for i, state in enumerate(states):
        state.status, state.next_run_at = TaskStatus.PENDING, first + timedelta(microseconds=i)
    with allow_status_writes():  # a fixture: tasks as beat leaves them once planned
        TaskState.objects.bulk_update(states, ["status", "next_run_at"], batch_size=2000)
    return tasks


def leaders(*beats: Proc) -> list[Proc]:
    return [b for b in beats if LEADER_LOG in b.log()]


def fire_instants(task_id: str) -> list[datetime]:
    return sorted(
        Run.objects.filter(task_id=task_id, trigger="schedule").values_list(
            "scheduled_for", flat=True
        )
    )


def assert_unbroken(instants: list[datetime], every: timedelta) -> None:
    """Consecutive fires, each recorded once: no duplicate, no hole."""
    assert instants, "no fire recorded"
    assert len(set(instants)) == len(instants), "an instant was recorded twice"
    gaps = {b - a for a, b in zip(instants, instants[1:], strict=False)}
    assert gaps <= {every}, f"fires are not consecutive: gaps {sorted(gaps)}"
