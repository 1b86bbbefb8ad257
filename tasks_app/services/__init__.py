"""Every write: tasks, schedules and runs, each asked for by a way in and checked here.

Entry points (admin, API, management commands, Celery tasks, the beat scheduler) call these
functions and hold no rules of their own. A status moves only through the store
(``tasks_app.store``: conditional updates, ``UPDATE ... WHERE status = <expected>``), which
these functions call, so a duplicated message or a second process racing for the same row
changes nothing.

Modules: ``task_operations`` (tasks: create, change, delete (one or a set at once), pause,
backfill, run now), ``task_rules`` (the rules of a task that span fields or read what is
stored), ``schedule_mirror`` (a task's schedule mirrored: its next fire, its once run and its
beat entry), ``run_create`` (new runs and attempts), ``run_release`` (pending runs onto the
broker), ``run_lifecycle`` (a run failed, interrupted, lost, cancelled, expired),
``time_limits``, ``django_task`` (runs enqueued through Django's task framework),
``alarms`` (schedule errors), ``queue_pause`` (a queue paused and resumed), ``runs_prune``
(old runs deleted), ``run_tally`` (finished runs counted for /metrics), ``permissions`` (who
may do what), ``tokens`` (API tokens), ``flow``, ``unique_calls``, ``duplicate``, ``audit``,
``errors``. What only a worker writes (a run's claim, execution and finish, its lease) is in
``tasks_app.worker``; what only beat writes (recurring fires, alarms, the sweep), in
``tasks_app.beat``.
Schedules declared in code are applied by ``tasks_app.schedules`` (``manage.py tasks sync``).
"""

from .duplicate import task_duplicate
from .errors import ConflictError
from .flow import flow_admit
from .queue_pause import queue_pause, queue_resume
from .run_create import run_create, run_retry
from .run_lifecycle import cap_output, run_cancel, run_fail, run_interrupt, run_lost
from .run_release import horizon, publish_runs, release_due_runs
from .run_tally import run_tally_advance
from .runs_prune import PruneReport, runs_prune
from .schedule_mirror import EXECUTE_TASK, OWNED_ENTRY_PREFIX
from .task_operations import (
    TASK_FIELDS,
    definition_refusal,
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
    tasks_delete,
    tasks_save,
)

__all__ = [
    "flow_admit",
    "queue_pause",
    "queue_resume",
    "EXECUTE_TASK",
    "OWNED_ENTRY_PREFIX",
    "TASK_FIELDS",
    "definition_refusal",
    "ConflictError",
    "PruneReport",
    "cap_output",
    "horizon",
    "publish_runs",
    "release_due_runs",
    "run_cancel",
    "run_create",
    "run_fail",
    "run_interrupt",
    "run_lost",
    "run_retry",
    "run_tally_advance",
    "runs_prune",
    "task_backfill",
    "task_create",
    "task_create_with_run",
    "task_delete",
    "task_duplicate",
    "task_execute",
    "task_pause",
    "task_resume",
    "task_save",
    "tasks_delete",
    "tasks_save",
    "task_schedule_once",
    "task_update",
]
