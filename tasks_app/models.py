"""Tasks (what to do and when) and runs (one execution each).

Statuses only move through the named statements of ``tasks_app.store``, which the services
issue: an ORM write of ``Run.status`` or ``TaskState.status`` (``update()``, ``bulk_update()``,
``save()`` of a changed status) raises :class:`StatusWriteRefused`. Models carry no other
side effects in ``save()``. The vocabularies (statuses, triggers, policies) are in
``tasks_app.vocabulary.choices``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any

from django.core.validators import RegexValidator
from django.db import models
from django.db.models.functions import Coalesce, NullIf
from django.utils import timezone

from .conf import default_queue  # the field's default (migration 0001 names it here)
from .vocabulary.choices import (
    ACTIVE_RUN_STATUSES,
    CANCELLABLE_RUN_STATUSES,
    EXPLICIT_TRIGGERS,
    FINAL_RUN_STATUSES,
    RECURRING,
    RETRYABLE_RUN_STATUSES,
    STATUS_MAX_LENGTH,
    TIMED_TRIGGERS,
    CatchupPolicy,
    HoldReason,
    OverlapPolicy,
    RunStatus,
    ScheduleType,
    TaskStatus,
    Trigger,
)
from .vocabulary.validation import (
    DEFAULT_PRIORITY,
    NUMERIC_BOUNDS,
    TASK_ID_MAX_LENGTH,
    TASK_ID_PATTERN,
    UNIQUE_KEY_MAX_LENGTH,
    UNIQUE_ON_MAX_LENGTH,
    UNIQUE_ON_PATTERN,
    UNIQUE_ON_RULE,
    check_storable,
    flow_key_validator,
    rate_validator,
)
from .vocabulary.validation import bounds_validators as bounded

__all__ = [
    "ACTIVE_RUN_STATUSES",
    "CANCELLABLE_RUN_STATUSES",
    "EXPLICIT_TRIGGERS",
    "FINAL_RUN_STATUSES",
    "RECURRING",
    "RETRYABLE_RUN_STATUSES",
    "CatchupPolicy",
    "OverlapPolicy",
    "FlowKey",
    "HoldReason",
    "Run",
    "RunStatus",
    "StatusWriteRefused",
    "RunTally",
    "RunTallyMark",
    "ScheduleType",
    "Task",
    "TaskAuditEntry",
    "TaskState",
    "TaskStatus",
    "Trigger",
    "allow_status_writes",
]

_status_writes_allowed: ContextVar[bool] = ContextVar("tasks_app_status_writes", default=False)


class StatusWriteRefused(RuntimeError):
    """An ORM write of a run's or a task state's status: statuses change only through the
    named statements of ``tasks_app.store`` (each checked against the allowed transitions)."""


@contextmanager
def allow_status_writes() -> Iterator[None]:
    """Let the ORM write statuses inside the block: for fixtures that seed rows in a given
    state (tests, benchmarks). The app's own code never enters it
    (tests/unit/test_architecture.py)."""
    token = _status_writes_allowed.set(True)
    try:
        yield
    finally:
        _status_writes_allowed.reset(token)


def _refuse(model: type[models.Model], how: str) -> None:
    if not _status_writes_allowed.get():
        raise StatusWriteRefused(
            f"{model.__name__}.status written by {how} outside tasks_app.store: "
            "statuses change only through the store's named statements"
        )


class StatusGuardedQuerySet(models.QuerySet):  # type: ignore[type-arg]
    """Refuses ``update(status=...)`` and ``bulk_update(..., ["status"])``."""

    def update(self, **kwargs: Any) -> int:
        if "status" in kwargs:
            _refuse(self.model, "QuerySet.update()")
        return super().update(**kwargs)

    def bulk_update(
        self, objs: Iterable[Any], fields: Iterable[str], batch_size: int | None = None
    ) -> int:
        fields = list(fields)
        if "status" in fields:
            _refuse(self.model, "QuerySet.bulk_update()")
        return super().bulk_update(objs, fields, batch_size=batch_size)


StatusGuardedManager = models.Manager.from_queryset(StatusGuardedQuerySet)


class StatusGuarded(models.Model):
    """A model whose ``status`` the ORM may insert but not change: ``save()`` of a loaded row
    whose status differs from the one read raises :class:`StatusWriteRefused`."""

    objects = StatusGuardedManager()

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        update_fields = kwargs.get("update_fields")
        writes_status = update_fields is None or "status" in update_fields
        if (
            writes_status
            and not self._state.adding
            and "status" in self.__dict__
            and self.__dict__["status"] != getattr(self, "_loaded_status", None)
        ):
            _refuse(type(self), "Model.save()")
        super().save(*args, **kwargs)
        self._loaded_status = self.__dict__.get("status")

    @classmethod
    def from_db(cls, db: str | None, field_names: Any, values: Any) -> Any:
        instance = super().from_db(db, field_names, values)
        instance._loaded_status = instance.__dict__.get("status")
        return instance

    def refresh_from_db(self, *args: Any, **kwargs: Any) -> None:
        super().refresh_from_db(*args, **kwargs)
        self._loaded_status = self.__dict__.get("status")


def bounds_constraints(table: str) -> list[models.BaseConstraint]:
    """One CHECK constraint per bounded column of ``validation.NUMERIC_BOUNDS`` (NULL
    passes: the field is optional). The services do not ask Django to evaluate them before a
    save (one query each): the field validators state the same ranges."""
    return [
        models.CheckConstraint(
            condition=models.Q(**{f"{name}__isnull": True})
            | models.Q(**{f"{name}__gte": b.low, f"{name}__lte": b.high}),
            name=f"{table}_{name}_range",
            violation_error_message=f"{name} must be between {b.low} and {b.high}",
        )
        for name, b in NUMERIC_BOUNDS.items()
    ]


task_id_validator = RegexValidator(
    TASK_ID_PATTERN,
    "Use letters, digits, '-', '_' and '.', starting with a letter or digit.",
)


class Task(models.Model):
    id = models.CharField(
        primary_key=True, max_length=TASK_ID_MAX_LENGTH, validators=[task_id_validator]
    )
    name = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    action = models.CharField(max_length=100)
    payload = models.JSONField(default=dict, blank=True)

    queue = models.CharField(max_length=100, default=default_queue)
    priority = models.PositiveSmallIntegerField(
        default=DEFAULT_PRIORITY, validators=bounded("priority")
    )
    max_retries = models.PositiveIntegerField(default=0, validators=bounded("max_retries"))
    retry_backoff_seconds = models.PositiveIntegerField(
        default=10, validators=bounded("retry_backoff_seconds")
    )
    timeout_seconds = models.PositiveIntegerField(
        null=True, blank=True, validators=bounded("timeout_seconds")
    )
    expires_after_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=bounded("expires_after_seconds"),
        help_text="A run that could not start this long after its due time is expired.",
    )

    schedule_type = models.CharField(
        max_length=10, choices=ScheduleType.choices, default=ScheduleType.NONE
    )
    run_at = models.DateTimeField(null=True, blank=True, help_text="For 'once' schedules.")
    interval_seconds = models.PositiveIntegerField(
        null=True, blank=True, validators=bounded("interval_seconds")
    )
    cron = models.CharField(
        max_length=200, blank=True, help_text="5 fields: minute hour day-of-month month weekday."
    )
    timezone = models.CharField(max_length=64, default="UTC", help_text="IANA name for cron.")

    start_at = models.DateTimeField(null=True, blank=True, help_text="No fire before this.")
    end_at = models.DateTimeField(null=True, blank=True, help_text="No fire after this.")
    max_runs = models.PositiveIntegerField(
        null=True, blank=True, validators=bounded("max_runs"), help_text="Stop after N fires."
    )
    jitter_seconds = models.PositiveIntegerField(default=0, validators=bounded("jitter_seconds"))
    overlap_policy = models.CharField(
        max_length=10, choices=OverlapPolicy.choices, default=OverlapPolicy.ALLOW
    )
    catchup = models.CharField(
        max_length=10, choices=CatchupPolicy.choices, default=CatchupPolicy.SKIP
    )
    catchup_window_seconds = models.PositiveIntegerField(
        default=3600, validators=bounded("catchup_window_seconds")
    )
    pause_after_failures = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=bounded("pause_after_failures"),
        help_text="Pause the task after this many consecutive failed runs.",
    )
    alert_after_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=bounded("alert_after_seconds"),
        help_text="Raise the missed-run alarm when a fire has not completed this long after it.",
    )
    keep_runs_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=bounded("keep_runs_days"),
        help_text="Delete this task's finished runs after this many days "
        "(blank: TASKS_RUN_RETENTION_DAYS, and TASKS_FAILED_RUN_RETENTION_DAYS for failed ones).",
    )
    keep_runs_count = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=bounded("keep_runs_count"),
        help_text="Keep at most this many finished runs of this task (the newest); "
        "blank: no limit by number.",
    )
    # Flow control (tasks_app.services.flow, docs/flow-control.md): at most N runs at once
    # across every worker, at most M at once per key, and at most so many starts per period,
    # held by the database when a run is claimed. The key is the value of one field of a run's
    # payload (a keyword argument of a @task function).
    flow_key = models.CharField(
        max_length=100,
        blank=True,
        default="",
        db_default="",
        validators=[flow_key_validator],
        help_text="The payload field (a @task function's argument) whose value is a run's key "
        "for the per-key limits, e.g. customer_id.",
    )
    concurrency_limit = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=bounded("concurrency_limit"),
        help_text="At most this many runs of the task at once, across every worker.",
    )
    concurrency_limit_per_key = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=bounded("concurrency_limit_per_key"),
        help_text="At most this many runs with the same key at once (needs flow_key).",
    )
    rate_limit = models.CharField(
        max_length=20,
        blank=True,
        default="",
        db_default="",
        validators=[rate_validator],
        help_text="At most this many starts per period across every worker: 10/s, 100/m, "
        "1000/h, 5000/d.",
    )
    rate_limit_per_key = models.CharField(
        max_length=20,
        blank=True,
        default="",
        db_default="",
        validators=[rate_validator],
        help_text="The same per key (needs flow_key).",
    )
    # Unique calls (docs/flow-control.md): a call of this task whose key is already held by
    # a waiting run returns that run (or, with debounce, replaces it).
    unique_on = models.CharField(
        max_length=UNIQUE_ON_MAX_LENGTH,
        validators=[RegexValidator(UNIQUE_ON_PATTERN, UNIQUE_ON_RULE)],
        blank=True,
        default="",
        db_default="",
        help_text="Blank: calls are not deduplicated; a keyword argument or payload field "
        "whose value is a call's key; '*': the whole call's arguments.",
    )
    unique_for_seconds = models.PositiveIntegerField(
        default=0,
        db_default=0,
        validators=bounded("unique_for_seconds"),
        help_text="0: a key is held while its run waits. N: also for N seconds after the "
        "call that made the run; with debounce, a run waits N seconds after the newest call.",
    )
    debounce = models.BooleanField(
        default=False,
        db_default=False,
        help_text="A call with the key of a waiting run replaces that run (the newest call "
        "wins) instead of returning it.",
    )
    # The module that declares this task (``TASKS_SCHEDULES_MODULE``, written by
    # ``manage.py tasks sync``): its definition is then read-only everywhere else; operators
    # still run, pause, resume and backfill it. Blank: owned by the admin, API and CLI.
    declared_in = models.CharField(
        max_length=200, blank=True, default="", db_default="", editable=False
    )

    periodic_task = models.OneToOneField(
        "django_celery_beat.PeriodicTask",
        null=True,
        blank=True,
        editable=False,
        on_delete=models.SET_NULL,
        related_name="owner_task",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = bounds_constraints("task")
        indexes = [
            # The lists' filters, each in id order (a page is an index range, not a sort of
            # every match), and the values in use the filters offer (a loose index scan).
            models.Index(fields=["action", "id"], name="task_action_idx"),
            models.Index(fields=["queue", "id"], name="task_queue_idx"),
            models.Index(fields=["schedule_type", "id"], name="task_schedule_type_idx"),
            # What beat reads on its ticks besides the due fires, each through an index of the
            # few tasks it concerns, so a tick costs the same with a million stored schedules:
            # the missed-run alarm's watched tasks (beat.alarms.alarms_check),
            models.Index(
                fields=["id"],
                name="task_alert_watched_idx",
                condition=models.Q(alert_after_seconds__isnull=False),
            ),
            # the tasks with retention rules of their own (services.runs_prune.prune_plan).
            models.Index(
                fields=["id"],
                name="task_own_retention_idx",
                condition=models.Q(keep_runs_days__isnull=False)
                | models.Q(keep_runs_count__isnull=False),
            ),
        ]
        # Search on a fragment of an id or a name (``icontains``: UPPER(col::text) LIKE
        # '%X%') is served by two pg_trgm GIN indexes on those expressions, task_id_trgm_idx
        # and task_name_trgm_idx, created in SQL by migration 0017: Django spells an operator
        # class only with django.contrib.postgres installed, which this app does not require.
        # One per guarded action kind (tasks_app.services.permissions): held by superusers only
        # until granted, like every Django permission.
        permissions = [
            ("use_action_exec", "Can create, change and run tasks with the exec action"),
            ("use_action_command", "Can create, change and run tasks with the command action"),
            ("use_action_http", "Can create, change and run tasks with the http action"),
            ("use_action_email", "Can create, change and run tasks with the email action"),
            ("use_action_celery", "Can create, change and run tasks with the celery action"),
            (
                "use_action_django_task",
                "Can create, change and run tasks with the django_task action",
            ),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def is_recurring(self) -> bool:
        return self.schedule_type in RECURRING

    @property
    def paused(self) -> bool:
        """Whether the task is paused: its state row's status, the one home of the pause
        (who paused it, when and why are there too), written only by the store's named
        statements. A task not saved yet has no state row and is not paused."""
        return not self._state.adding and self.state.status == TaskStatus.PAUSED

    def load_state(self) -> TaskState:
        """The task's state row as stored now (cached as ``self.state`` from then on)."""
        self.state = TaskState.objects.get(pk=self.pk)
        return self.state

    def clean(self) -> None:
        """The field rules (no query): what Postgres cannot store. The rules that span
        fields run in the services (``tasks_app.services.task_rules``)."""
        check_storable(self)


class TaskState(StatusGuarded):
    """What the engine changes about a task as its runs come and go: one row per task
    (``task.state``), inserted with the task by a trigger (migration 0012), so every way of
    creating a task — the services, ``bulk_create``, SQL — makes one.

    Apart from the task's configuration (``Task``, edited by people) because every claim
    and every completion rewrites it: a narrow row without check constraints costs
    Postgres a fraction of rewriting the task row (docs/scale.md), and an edit of the task
    saved from a form can no longer write back a status, next fire or count read before it.
    """

    task = models.OneToOneField(
        Task, primary_key=True, on_delete=models.CASCADE, related_name="state", editable=False
    )
    status = models.CharField(
        max_length=STATUS_MAX_LENGTH, choices=TaskStatus.choices, default=TaskStatus.CREATED
    )
    next_run_at = models.DateTimeField(null=True, blank=True)
    # Plain integers: a PositiveIntegerField's ">= 0" check would be evaluated on every write.
    consecutive_failures = models.IntegerField(default=0)
    fire_count = models.IntegerField(default=0)
    # Beat's word on the task, here rather than on the configuration row, which only a
    # person's edit or a sync writes: the missed-run alarm (services.alarms), and the
    # schedule error set when the task's schedule math raised (beat.firing), which
    # makes beat skip the task until an edit through the services clears it. Database
    # defaults, as the state row is inserted by a trigger (store/schema.sql).
    alarm_since = models.DateTimeField(null=True, blank=True, editable=False)
    alarm_note = models.TextField(blank=True, default="", db_default="", editable=False)
    schedule_error = models.TextField(blank=True, default="", db_default="", editable=False)
    # The pause: the status ``paused`` (``Task.paused`` reads it), with when, by whom and
    # why, written together by task_paused and cleared by task_resumed. Here, not on the
    # configuration row, as the engine pauses a task too (pause_after_failures), and the
    # statements that re-read a task's status under concurrency read this row.
    paused_at = models.DateTimeField(null=True, blank=True, editable=False)
    paused_by = models.CharField(
        max_length=150, blank=True, default="", db_default="", editable=False
    )
    pause_note = models.TextField(blank=True, default="", db_default="", editable=False)

    class Meta:
        indexes = [
            # Beat's hot query: due tasks by their next fire (recurring, unpaused and unflagged
            # ones, filtered on the task and this row).
            models.Index(fields=["next_run_at"], name="task_state_next_run_idx"),
            # The tasks in alarm (cleared by alarms_check; listed by /api/health, the overview).
            models.Index(
                fields=["alarm_since"],
                name="task_in_alarm_idx",
                condition=models.Q(alarm_since__isnull=False),
            ),
            # The lists' status filter in task id order.
            models.Index(fields=["status", "task"], name="task_state_status_idx"),
            # The paused tasks, latest pause first: the overview's list (a walk of the first
            # rows, not a sort of every task), the count /metrics reports.
            models.Index(
                fields=["-paused_at", "task"],
                name="task_paused_idx",
                condition=models.Q(status="paused"),
            ),
            # The overview's failing tasks, longest failure streak first (selectors.overview
            # .failing_tasks): read in that order, only the tasks of the first streaks are
            # sorted by their latest failure, not every failing task.
            models.Index(
                fields=["-consecutive_failures", "task"],
                name="task_state_failing_idx",
                condition=models.Q(status="failed") | models.Q(consecutive_failures__gt=0),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_id}: {self.status}"


class Run(StatusGuarded):
    # A column has its default in the database too (db_default) unless it is nullable: the
    # store's enqueue names only the columns it sets (tests/store/test_new_column.py).
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index of its own: run_task_due_idx (task, -due_at) serves every lookup by task.
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="runs", db_index=False)
    trigger = models.CharField(max_length=10, choices=Trigger.choices)
    # The action this run was made with, recorded when it is made: its payload and outcome
    # are masked by that action's secret fields for the run's whole life, whatever its task
    # becomes (tasks_app.vocabulary.secret_fields). Blank (a row written by other tools): its task's.
    action = models.CharField(max_length=100, blank=True, default="", db_default="")
    # Who asked for it: a user's name, or what made it without one (choices.REQUESTERS).
    requested_by = models.CharField(
        max_length=250,
        blank=True,
        default="",
        db_default="",
        help_text="Who asked for this run: a user, or beat, schedule:<module>, code, "
        "retry:<run id>.",
    )
    status = models.CharField(
        max_length=STATUS_MAX_LENGTH, choices=RunStatus.choices, default=RunStatus.PENDING
    )
    attempt = models.PositiveIntegerField(default=1, db_default=1)
    interruptions = models.PositiveSmallIntegerField(
        default=0,
        db_default=0,  # rows inserted by raw SQL (benchmarks, other tools) start at 0 too
        help_text="Earlier attempts of this run cut off by their worker's death "
        "(not counted against max_retries).",
    )
    # Indexed only where set (run_first_attempt_idx): a first attempt, most runs, links
    # nowhere, and an index entry for it would be written at every change of its status.
    first_attempt = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="retries",
        db_index=False,
    )

    scheduled_for = models.DateTimeField(help_text="The instant this run stands for.")
    due_at = models.DateTimeField()
    expires_at = models.DateTimeField(null=True, blank=True)
    # One clock for a run's timeline (created <= queued <= started <= finished): the
    # database's (tasks_app.runtime.clock), read by the process that records each step when it records
    # it. A fire is created and queued at the instant of beat's tick (beat.firing), hence
    # a default the service sets rather than auto_now_add, which would stamp it later than its
    # queuing (the default itself serves only ORM writes outside the services).
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    lateness_ms = models.FloatField(null=True, blank=True, help_text="started_at - due_at, in ms")
    worker = models.CharField(max_length=200, blank=True, default="", db_default="")
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Renewed by the worker while the run is running."
    )
    # A person asked a running run to stop (services.run_cancel): its action sees the request,
    # its worker ends it after TASKS_CANCEL_GRACE_SECONDS, and it ends cancelled.
    cancel_requested_at = models.DateTimeField(
        null=True, blank=True, help_text="When a person asked this running run to stop."
    )

    # Flow control (tasks_app.services.flow): the run's key (its task's flow_key read from
    # its payload when it is first held or claimed), why it is held back while pending
    # (concurrency, rate; blank: it is not) and, held by a rate, the start it reserved.
    flow_key = models.CharField(max_length=200, blank=True, default="", db_default="")
    held = models.CharField(
        max_length=12, blank=True, default="", db_default="", choices=HoldReason.choices
    )
    not_before = models.DateTimeField(
        null=True, blank=True, help_text="Held by a rate limit: the start it reserved."
    )

    # This run's own arguments, queue and priority (an enqueue of a @task function, "run
    # now with..."): unset, the task's. Read through call_payload, queue_name, priority_level.
    payload = models.JSONField(
        null=True, blank=True, help_text="This run's own payload; none: the task's."
    )
    queue = models.CharField(
        max_length=100, blank=True, default="", db_default="", help_text="Blank: the task's."
    )
    priority = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=bounded("priority"),
        help_text="0 (last) to 9 (first); none: the task's.",
    )

    # The uniqueness key of the call that made this run (blank: none): while the run waits,
    # another call of its task with the same key gets this run (run_unique_waiting_key).
    unique_key = models.CharField(
        max_length=UNIQUE_KEY_MAX_LENGTH,
        blank=True,
        default="",
        db_default="",
        help_text="The key of the call that made this run; blank: none.",
    )

    output = models.TextField(blank=True, default="", db_default="")
    truncated = models.BooleanField(default=False, db_default=False)
    error = models.TextField(blank=True, default="", db_default="")
    result = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-due_at"]
        constraints = [
            # A recurring schedule's fire is recorded once, however many beats replay it.
            models.UniqueConstraint(
                fields=["task", "scheduled_for"],
                condition=models.Q(trigger__in=["schedule", "backfill"]),
                name="run_unique_fire",
            ),
            # One waiting run per task and key: two racing calls with one key cannot both
            # insert (services.unique_calls).
            models.UniqueConstraint(
                fields=["task", "unique_key"],
                condition=models.Q(status__in=["pending", "queued"]) & ~models.Q(unique_key=""),
                name="run_unique_waiting_key",
            ),
        ]
        indexes = [
            # What the release publishes: pending runs not held back by flow control.
            models.Index(
                fields=["due_at"],
                name="run_pending_due_idx",
                condition=models.Q(status="pending", held=""),
            ),
            # Runs held back by flow control, per task, in due order (services.flow).
            models.Index(
                fields=["task", "due_at"],
                name="run_held_idx",
                condition=models.Q(status="pending") & ~models.Q(held=""),
            ),
            # Beat's sweep: waiting runs past their deadline (no scan of a large backlog).
            models.Index(
                fields=["expires_at"],
                name="run_waiting_expiry_idx",
                condition=models.Q(status__in=["pending", "queued"], expires_at__isnull=False),
            ),
            models.Index(fields=["task", "-due_at"], name="run_task_due_idx"),
            # A task's waiting runs (its next_run_at, overlap checks, pausing): found without
            # walking its finished history or the dead versions every claim leaves behind.
            models.Index(
                fields=["task", "due_at"],
                name="run_task_waiting_idx",
                condition=models.Q(status__in=["pending", "queued"]),
            ),
            models.Index(fields=["status", "-due_at"], name="run_status_due_idx"),
            # A task's running runs: whether another still runs when one ends
            # (tasks_app_other_running), without walking the task's history.
            models.Index(
                fields=["task"],
                name="run_running_task_idx",
                condition=models.Q(status="running"),
            ),
            # The unfiltered run lists (admin, API), newest first with a stable tie-break,
            # and the overview's windows: no scan that grows with history.
            models.Index(fields=["-due_at", "-id"], name="run_due_idx"),
            # /metrics tallies runs as they finish (tasks_app.services.run_tally).
            models.Index(
                fields=["finished_at"],
                name="run_finished_idx",
                condition=models.Q(finished_at__isnull=False),
            ),
            # A key's latest run, whatever became of it: a unique call's window
            # (Task.unique_for_seconds) looks back through it.
            models.Index(
                fields=["task", "unique_key", "-created_at"],
                name="run_unique_key_idx",
                condition=~models.Q(unique_key=""),
            ),
            # A run's later attempts (its attempts page, retention unlinking them).
            models.Index(
                fields=["first_attempt"],
                name="run_first_attempt_idx",
                condition=models.Q(first_attempt__isnull=False),
            ),
        ]

    # Not a column: whether runs of its task may wait for its slot (held by flow control), as
    # recording its outcome found (services.run_lifecycle; True when not known).
    flow_waiting: bool = True
    # Not a column: true on the run a keyed call got instead of a new one (the run that
    # already held its key: services.unique_calls).
    deduplicated: bool = False

    def __str__(self) -> str:
        return f"{self.task_id} run {self.id}"

    @property
    def made_with(self) -> str:
        """The action this run was made with (its secrets are masked by it): recorded on the
        run, or its task's for a row that recorded none."""
        return self.action or self.task.action

    @property
    def call_payload(self) -> dict[str, Any]:
        """The payload this run calls its action with: its own, or its task's."""
        return self.task.payload if self.payload is None else self.payload

    @property
    def queue_name(self) -> str:
        """The queue this run is published to: its own, or its task's."""
        return self.queue or self.task.queue

    @property
    def timed(self) -> bool:
        """Whether this run's due instant was set (a schedule's fire, a delay, ``at``, a
        retry's backoff, a call's ``run_after``) rather than "as soon as possible": such a
        run goes ahead of a backlog of the others (``tasks_app.messaging.queues.lane``). Not the next
        attempt of an interrupted run: it goes ahead in its queue by priority, where a worker
        whose pool process froze holds no free slot (it would take a lane's message)."""
        if self.interruptions:
            return False
        return (
            self.trigger in TIMED_TRIGGERS
            or self.due_at > self.created_at
            or self.not_before is not None
        )

    @property
    def starts_at(self) -> datetime:
        """The instant this run may start: its due instant, or the later start a rate limit
        reserved for it (``not_before``)."""
        if self.not_before is not None and self.not_before > self.due_at:
            return self.not_before
        return self.due_at

    @property
    def priority_level(self) -> int:
        """This run's broker priority: its own, or its task's."""
        return self.task.priority if self.priority is None else self.priority

    @property
    def duration_ms(self) -> int | None:
        if self.started_at and self.finished_at:
            return round((self.finished_at - self.started_at).total_seconds() * 1000)
        return None


def run_queue() -> Coalesce:
    """A run's queue in a query (``Run.queue_name``): its own, or its task's."""
    return Coalesce(NullIf(models.F("queue"), models.Value("")), models.F("task__queue"))


def outer_run_queue() -> Coalesce:
    """:func:`run_queue` of the run in the enclosing query, inside a subquery."""
    return Coalesce(
        NullIf(models.OuterRef("queue"), models.Value("")), models.OuterRef("task__queue")
    )


class Still(models.Lookup):  # type: ignore[type-arg]
    """``Run.objects.filter(pk=…, status__still="queued")``: the guard of a conditional
    update on a run named by key, as ``IS NOT DISTINCT FROM`` (tasks_app/store/queries.sql
    says why). With ``status = 'queued'``, statistics that say queued or pending runs are
    rare let the planner match the partial indexes of waiting runs (``run_pending_due_idx``,
    ``run_task_waiting_idx``) and walk every waiting run for one row
    (tests/store/test_plans.py); this form it cannot match, so the row is found by key."""

    lookup_name = "still"

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"{lhs} IS NOT DISTINCT FROM {rhs}", [*lhs_params, *rhs_params]


Run._meta.get_field("status").register_lookup(Still)


class FlowKey(models.Model):
    """The flow-control state of one task (``per_key`` false, ``key`` blank) or of one key of
    it: the next start its rate limit allows (``next_start_at``, a reservation schedule: each
    start or reservation pushes it one step further) and when the key last had its turn
    (``last_turn_at``: a run of it let go for a free slot, or started without waiting; the
    key whose turn is oldest goes first when slots free up: round-robin). Read and written by
    the SQL of tasks_app/store (tasks_app_flow_verdict, admit_runs, held_for_slots)."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="+", db_index=False)
    per_key = models.BooleanField()
    key = models.CharField(max_length=200, blank=True)
    next_start_at = models.DateTimeField(null=True, blank=True)
    last_turn_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "per_key", "key"], name="flow_key_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.task_id} key {self.key!r}" if self.per_key else f"{self.task_id}"


class RunTally(models.Model):
    """Finished runs counted once each, by status and action, for ``/metrics``: a counter that
    neither retention nor deleting a task takes back (``tasks_app.services.run_tally``)."""

    status = models.CharField(max_length=STATUS_MAX_LENGTH)
    action = models.CharField(max_length=100)
    runs = models.BigIntegerField(default=0)
    lateness_count = models.BigIntegerField(default=0)
    lateness_sum_ms = models.FloatField(default=0)
    # Cumulative counts of lateness at or under each of metrics.LATENESS_BUCKETS.
    lateness_buckets = models.JSONField(default=list)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["status", "action"], name="run_tally_key"),
        ]

    def __str__(self) -> str:
        return f"{self.status} {self.action}: {self.runs}"


class RunTallyMark(models.Model):
    """How far the tally has counted: runs finished before ``through`` are in it."""

    through = models.DateTimeField()

    def __str__(self) -> str:
        return f"runs finished before {self.through.isoformat()}"


class QueuePause(models.Model):
    """A paused queue: while its row exists, no run of that queue starts (the release does
    not publish them, the claim refuses a message that arrives), and none is lost: they wait
    ``pending`` with their due instant kept. Written and deleted by the services only
    (``services.queue_pause``, ``services.queue_resume``); the row is the pause, read by the
    statements that publish and claim runs (``tasks_app/store/queries.sql``)."""

    queue = models.CharField(primary_key=True, max_length=100)
    paused_at = models.DateTimeField()
    paused_by = models.CharField(max_length=150, blank=True, default="")
    note = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["queue"]
        verbose_name = "paused queue"

    def __str__(self) -> str:
        return f"queue {self.queue} paused"


class TaskAuditEntry(models.Model):
    """Who changed what on a task, from what, to what. Kept after the task is deleted."""

    task_id = models.CharField(max_length=100, db_index=True)
    at = models.DateTimeField(auto_now_add=True)
    by = models.CharField(max_length=150, blank=True)
    event = models.CharField(max_length=20)  # created, updated, paused, resumed, deleted, ...
    changes = models.JSONField(default=dict, blank=True)  # {field: [old, new]}
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["-at"]
        verbose_name_plural = "task audit entries"

    def __str__(self) -> str:
        return f"{self.task_id} {self.event} by {self.by or '-'}"
