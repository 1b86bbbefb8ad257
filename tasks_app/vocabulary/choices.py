"""The fixed vocabularies of tasks and runs: schedule kinds, policies, statuses, triggers.

Pure (no models, no queries), so that validation, policies and the models can all import it.
Statuses only move through the named statements of ``tasks_app.store``, along
``store.RUN_TRANSITIONS`` for a run.
"""

from __future__ import annotations

from django.db import models

# The Celery task that executes a run (``tasks_app.worker.celery_tasks.execute_run``): the name its messages
# carry (``tasks_app.messaging.dispatch``) and the worker's logs recognise (``observability.logs``).
EXECUTE_RUN = "tasks_app.execute_run"


class ScheduleType(models.TextChoices):
    NONE = "none", "On demand"
    ONCE = "once", "Once, at a time"
    INTERVAL = "interval", "Every N seconds"
    CRON = "cron", "Cron expression"


RECURRING = (ScheduleType.INTERVAL, ScheduleType.CRON)


class OverlapPolicy(models.TextChoices):
    ALLOW = "allow", "Allow overlapping runs"
    SKIP = "skip", "Skip a fire while a run is active"
    BUFFER_ONE = "buffer_one", "Keep at most one waiting run"


class HoldReason(models.TextChoices):
    """Why a pending run is held back by its task's flow control (tasks_app.services.flow)."""

    CONCURRENCY = "concurrency", "Waiting for a free slot (concurrency limit)"
    RATE = "rate", "Waiting for its reserved start (rate limit)"


class CatchupPolicy(models.TextChoices):
    SKIP = "skip", "Skip missed fires"
    LATEST = "latest", "One run for the missed fires"
    ALL = "all", "Every missed fire within the window"


class TaskStatus(models.TextChoices):
    CREATED = "created"
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    PAUSED = "paused"
    CANCELLED = "cancelled"


# What a task's status says, shown beside it in the admin: the lifecycle of its latest run.
TASK_STATUS_MEANING: dict[str, str] = {
    TaskStatus.CREATED: "no run has ended yet and none is waiting",
    TaskStatus.PENDING: "a run is waiting for its time, or its schedule will fire again",
    TaskStatus.RUNNING: "one of its runs is running now",
    TaskStatus.COMPLETED: "its latest run completed",
    TaskStatus.FAILED: "its latest run failed after its retries, or could not start in time",
    TaskStatus.PAUSED: "fires stopped and delayed runs held until it is resumed; run now still runs",
    TaskStatus.CANCELLED: "its latest run was cancelled",
}


class RunStatus(models.TextChoices):
    PENDING = "pending"
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    RETRYING = "retrying"
    # Cut off by its worker's death (kill, OOM, lost node, deploy): a new attempt follows
    # that does not count against max_retries (docs/reliability.md).
    INTERRUPTED = "interrupted"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"


# The width of every column that stores a status (``Run.status``, ``TaskState.status``,
# ``RunTally.status``): written once here, so a longer status name cannot fit one column
# and overflow another.
STATUS_MAX_LENGTH = 12
if any(len(s) > STATUS_MAX_LENGTH for s in [*TaskStatus.values, *RunStatus.values]):
    raise ValueError(f"a status name is longer than STATUS_MAX_LENGTH ({STATUS_MAX_LENGTH})")

FINAL_RUN_STATUSES = frozenset(
    {
        RunStatus.COMPLETED,
        RunStatus.FAILED,
        RunStatus.RETRYING,
        RunStatus.INTERRUPTED,
        RunStatus.EXPIRED,
        RunStatus.CANCELLED,
        RunStatus.SKIPPED,
    }
)
ACTIVE_RUN_STATUSES = frozenset({RunStatus.PENDING, RunStatus.QUEUED, RunStatus.RUNNING})
# Pending and queued runs are cancelled at once; a running run is asked to stop.
CANCELLABLE_RUN_STATUSES = frozenset({RunStatus.PENDING, RunStatus.QUEUED, RunStatus.RUNNING})
RETRYABLE_RUN_STATUSES = frozenset({RunStatus.FAILED, RunStatus.EXPIRED, RunStatus.CANCELLED})


class Trigger(models.TextChoices):
    MANUAL = "manual"
    DELAY = "delay"
    AT = "at"
    SCHEDULE = "schedule"
    RETRY = "retry"
    BACKFILL = "backfill"
    API = "api", "API"
    CLI = "cli", "CLI"
    ADMIN = "admin"
    # A call of a @task function enqueued from code (Django's task framework).
    ENQUEUE = "enqueue"


# Who asked for a run when no person did (``Run.requested_by``; a person is their user name,
# the CLI without --as ``cli:<login>``): beat firing a schedule set by a person; beat firing a
# schedule declared in code (``schedule:<its module>``); an enqueue from code (Django's task
# framework); the next attempt of a run after a failure or an interruption
# (``retry:<that run's id>``).
REQUESTED_BY_BEAT = "beat"
REQUESTED_BY_CODE = "code"
REQUESTED_BY_SCHEDULE = "schedule:"
REQUESTED_BY_RETRY = "retry:"


# Runs asked for explicitly by a person start even while their task is paused.
EXPLICIT_TRIGGERS = (Trigger.MANUAL, Trigger.API, Trigger.CLI, Trigger.ADMIN, Trigger.RETRY)
# Runs whose due instant was set, not "as soon as possible" (``Run.timed``).
TIMED_TRIGGERS = (Trigger.SCHEDULE, Trigger.DELAY, Trigger.AT, Trigger.RETRY)
