"""Every read that more than one entry point makes (admin, API, CLI): lists with their
filters, the schedule preview, dead runs, attempts, alarms. No writes here."""

from .runs import (
    DEAD_STATUSES,
    OUTCOME_STATUSES,
    RUN_RANGES,
    RunOutcome,
    RunTotals,
    pending_fires_per_second,
    run_attempts,
    run_list,
    run_list_dead,
    run_outcome,
    run_tally_totals,
)
from .tasks import (
    MAX_PREVIEW,
    NEXT_RUN_PAUSED,
    NEXT_RUN_PAUSED_SHORT,
    TASK_RANGES,
    Fire,
    fires_due_per_second,
    overdue_fire,
    task_list,
    task_next_run_at,
    task_preview,
    tasks_in_alarm,
)

__all__ = [
    "fires_due_per_second",
    "pending_fires_per_second",
    "DEAD_STATUSES",
    "MAX_PREVIEW",
    "NEXT_RUN_PAUSED",
    "NEXT_RUN_PAUSED_SHORT",
    "OUTCOME_STATUSES",
    "RUN_RANGES",
    "TASK_RANGES",
    "Fire",
    "RunOutcome",
    "RunTotals",
    "overdue_fire",
    "run_attempts",
    "run_list",
    "run_list_dead",
    "run_outcome",
    "run_tally_totals",
    "task_list",
    "task_next_run_at",
    "task_preview",
    "tasks_in_alarm",
]
