"""Every write: tasks, schedules and runs. The only place that moves a status.

Entry points (admin, API, management commands, Celery tasks, the beat scheduler) call these
functions and hold no rules of their own. Status changes are conditional updates
(``UPDATE ... WHERE status = <expected>``), so a duplicated message or a second process
racing for the same row changes nothing.

Modules: ``tasks`` (tasks and schedules), ``runs`` (run creation and the worker-side
lifecycle), ``firing`` (recurring fires recorded by beat), ``common`` (audit, conflicts).
"""

from .common import ConflictError
from .duplicate import task_duplicate
from .firing import first_fire, schedule_fire_due, schedule_of
from .runs import (
    cap_output,
    retry_delay,
    run_cancel,
    run_claim,
    run_complete,
    run_execute,
    run_fail,
    run_retry,
)
from .tasks import (
    EXECUTE_TASK,
    TASK_FIELDS,
    task_backfill,
    task_create,
    task_create_with_run,
    task_delete,
    task_execute,
    task_pause,
    task_resume,
    task_save,
    task_schedule_once,
    task_update,
)

__all__ = [
    "EXECUTE_TASK",
    "TASK_FIELDS",
    "ConflictError",
    "cap_output",
    "first_fire",
    "retry_delay",
    "run_cancel",
    "run_claim",
    "run_complete",
    "run_execute",
    "run_fail",
    "run_retry",
    "schedule_fire_due",
    "schedule_of",
    "task_backfill",
    "task_create",
    "task_create_with_run",
    "task_delete",
    "task_duplicate",
    "task_execute",
    "task_pause",
    "task_resume",
    "task_save",
    "task_schedule_once",
    "task_update",
]
