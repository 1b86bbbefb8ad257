"""Tasks and their schedules: create, update, delete, pause, resume, run now, backfill."""

from __future__ import annotations

import copy
import logging
import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, OperationalError, transaction
from django_celery_beat.models import PeriodicTask, PeriodicTasks
from psycopg.errors import DeadlockDetected

from .. import store
from ..conf import app_settings
from ..models import (
    Run,
    ScheduleType,
    Task,
    TaskAuditEntry,
    Trigger,
)
from ..runtime import clock
from ..store import sets
from ..timing import scheduling
from ..timing.task_schedule import schedule_of
from ..vocabulary import secret_fields, validation
from . import django_task_paths, permissions
from .alarms import schedule_errors_clear
from .audit import audit, audits, plain
from .errors import ConflictError
from .run_create import new_run, requester, run_create, runs_insert
from .run_release import publish_runs, release_due_runs
from .schedule_mirror import (
    beat_entries_fields,
    fires_ahead_drop,
    sync_periodic_task,
    sync_schedule,
    tasks_plan_fires,
)
from .task_rules import (
    check_expiry,
    check_runnable,
    stored_schedule_of,
    task_check,
    validate_task,
)
from .unique_calls import policy_call, unique_call

Actor = permissions.Actor

log = logging.getLogger(__name__)
# A delete that meets a concurrent release or claim on the same runs is tried again.
DELETE_ATTEMPTS = 3
# Rows per statement when a set is written at once (tasks_save, tasks_delete).
SET_BATCH = 5000

SCHEDULE_FIELDS = ("schedule_type", "run_at", "interval_seconds", "cron", "timezone", "start_at")
EXECUTION_FIELDS = (
    "queue",
    "priority",
    "max_retries",
    "retry_backoff_seconds",
    "timeout_seconds",
    "expires_after_seconds",
)
POLICY_FIELDS = (
    "start_at",
    "end_at",
    "max_runs",
    "jitter_seconds",
    "overlap_policy",
    "catchup",
    "catchup_window_seconds",
    "pause_after_failures",
    "alert_after_seconds",
    "keep_runs_days",
    "keep_runs_count",
    "unique_on",
    "unique_for_seconds",
    "debounce",
)
# How many of its runs may run or start at once (services.flow, docs/flow-control.md).
FLOW_FIELDS = (
    "flow_key",
    "concurrency_limit",
    "concurrency_limit_per_key",
    "rate_limit",
    "rate_limit_per_key",
)
# What a recorded fire is made of (its instant, due time, deadline, queue and priority):
# a change of one drops the fires recorded ahead, and beat records them again.
FIRE_FIELDS = (
    *SCHEDULE_FIELDS,
    "end_at",
    "max_runs",
    "jitter_seconds",
    "queue",
    "priority",
    "expires_after_seconds",
)
# What decides when a task's runs come into being: on a task with a schedule, setting or
# changing one of them makes runs (schedule_makes_runs), which needs the run permission.
RUN_MAKING_FIELDS = (*SCHEDULE_FIELDS, "end_at", "max_runs")
TASK_FIELDS = (
    "name",
    "description",
    "action",
    "payload",
    *EXECUTION_FIELDS,
    *SCHEDULE_FIELDS,
    *POLICY_FIELDS,
    *FLOW_FIELDS,
)


def task_create(*, id: str | None = None, by: Actor = "", **fields: Any) -> Task:
    """Create a task (and its schedule) after validating every field.

    ``id`` is user-supplied (slug characters) or generated. A duplicate id raises
    :class:`ConflictError`.
    """
    unknown = set(fields) - set(TASK_FIELDS)
    if unknown:
        raise ValidationError({name: ["unknown field"] for name in sorted(unknown)})
    task = Task(id=id or _generate_task_id(fields.get("action", "task")), **fields)
    if Task.objects.filter(pk=task.id).exists():
        raise ConflictError(f"a task with id {task.id!r} already exists")
    try:
        return task_save(task=task, by=by)
    except IntegrityError as exc:  # created concurrently between the check and the insert
        raise ConflictError(f"a task with id {task.id!r} already exists") from exc


def task_update(*, task: Task, data: dict[str, Any], by: Actor = "") -> Task:
    """Change the given fields of ``task``; schedule changes re-plan the next fire."""
    unknown = set(data) - set(TASK_FIELDS)
    if unknown:
        raise ValidationError({name: ["unknown or read-only field"] for name in sorted(unknown)})
    check_not_declared(task)
    for name, value in data.items():
        setattr(task, name, value)
    return task_save(task=task, by=by)


def schedule_makes_runs(task: Task, *, previous: Task | None) -> bool:
    """Whether saving ``task`` (over ``previous``; ``None`` for a new task) makes runs come
    into being: it has a schedule (``once``, ``interval`` or ``cron``) that is new, or one of
    ``RUN_MAKING_FIELDS`` changed. Such a save needs ``add_run`` like any other way of
    creating runs (``tasks_app.services.permissions``), whichever entry point makes it: the admin form
    asks this to word its field error; pausing a task or stopping its schedule makes none."""
    if task.schedule_type == ScheduleType.NONE:
        return False
    return previous is None or any(
        getattr(previous, f) != getattr(task, f) for f in RUN_MAKING_FIELDS
    )


def definition_refusal(task: Task) -> str | None:
    """Why the definition of ``task`` cannot be changed or deleted from here (it is declared
    in code: only ``manage.py tasks sync`` changes it), or ``None``. The one statement of
    the rule: the services refuse with it, the admin makes the fields read-only by it."""
    if not task.declared_in:
        return None
    return (
        f"task {task.pk!r} is declared in {task.declared_in}: change it there and run "
        "manage.py tasks sync (run now, pause, resume and backfill stay available)"
    )


def check_not_declared(task: Task) -> None:
    """Refuse (``ConflictError``, a 409) to change the definition of a task declared in code."""
    refusal = definition_refusal(task)
    if refusal:
        raise ConflictError(refusal)


def task_save(*, task: Task, by: Actor = "", owner: str | None = None) -> Task:
    """Validate and persist ``task`` as built by a form or a service, then sync its schedule:
    the one-task case of :func:`tasks_save`."""
    return tasks_save(tasks=[task], by=by, owner=owner)[0]


def tasks_save(
    *,
    tasks: Sequence[Task],
    by: Actor = "",
    owner: str | None = None,
    checked: bool = False,
    mark_beat_changed: bool = True,
) -> list[Task]:
    """Validate and persist ``tasks``, then sync their schedules; the tasks saved, in order.

    Each task is checked and written as :func:`_task_save_one` has it, one at a time (more
    than one: in one transaction, all or none), unless ``checked``: a set of definitions that ``manage.py tasks sync`` has checked already
    (``schedules.sync.schedules_plan``, with the rules every task passes), declared in the
    module ``owner`` and saved by a name (not a user). Each of them is either new or carries
    its stored task's id and its whole new definition (``_state.adding`` false), written over
    the stored task. The new recurring tasks, and the tasks whose stored and new schedules
    both recur (the stored one with its beat entry), are then written as sets: a few
    statements for the whole set instead of some twenty per task, the rows one at a time
    would write (tasks and their state rows, beat entries, first fires, audit entries), and
    django-celery-beat's "changed" mark set once (unless ``mark_beat_changed`` is false: the
    caller sets it once for a larger set). The others are written one at a time, after them,
    in order.
    """
    if not checked:
        if len(tasks) == 1:
            return [_task_save_one(task=tasks[0], by=by, owner=owner)]
        with transaction.atomic():  # a set: all of it or, a check failing, none
            return [_task_save_one(task=t, by=by, owner=owner) for t in tasks]
    assert isinstance(by, str) and owner is not None, "a checked set is a sync's"
    written = _update_recurring([t for t in tasks if not t._state.adding], module=owner, by=by)
    created = [t for t in tasks if t._state.adding and t.is_recurring]
    _create_recurring(created, module=owner, by=by)
    written.update({t.pk: t for t in created})
    saved: list[Task] = []
    for task in tasks:
        if task.pk in written:
            saved.append(written[task.pk])
        elif task._state.adding:
            saved.append(_task_save_one(task=task, by=by, owner=owner))
        else:  # the stored task, its definition replaced
            current = Task.objects.select_for_update().get(pk=task.pk)
            for name in TASK_FIELDS:
                setattr(current, name, getattr(task, name))
            current.declared_in = owner
            saved.append(_task_save_one(task=current, by=by, owner=owner))
    if written and mark_beat_changed:
        PeriodicTasks.update_changed()
    return saved


def _task_save_one(*, task: Task, by: Actor = "", owner: str | None = None) -> Task:
    """Validate and persist ``task`` as built by a form or a service, then sync its schedule.

    ``by`` a user: refused unless they may create or change it (and use its stored and its
    new action); a schedule set or changed makes runs (:func:`schedule_makes_runs`), so it
    needs ``add_run``.
    The definition of a task declared in code (``declared_in``) is changed only by
    ``manage.py tasks sync``, which passes its module as ``owner``; from anywhere else a
    change is a ``ConflictError``. Nothing is written when a check fails.
    """
    adding = task._state.adding
    previous = None if adding else Task.objects.filter(pk=task.pk).first()
    if owner is not None:
        task.declared_in = owner
    elif previous is not None and any(
        getattr(previous, f) != getattr(task, f) for f in TASK_FIELDS
    ):
        check_not_declared(previous)
    # A function's own task, made by code (an enqueue, a declaration) or already its own:
    # its function was chosen in code, not by whoever saves it now.
    own = django_task_paths.chosen_in_code(
        task, previous=previous, by=by, declared=owner is not None
    )
    by = permissions.authorize(
        by,
        "create" if adding else "update",
        action=tuple(a for a in (previous.action if previous else "", task.action) if a),
        creates_run=schedule_makes_runs(task, previous=previous),
    )
    if previous is not None:  # a secret sent back as "set" keeps its stored value (same origin)
        task.payload = secret_fields.payload_merged(
            task.action, task.payload, stored_action=previous.action, stored=previous.payload
        )
    with django_task_paths.own_function_checked(own):
        task_check(task, stored=stored_schedule_of(previous))
    now = clock.now()
    with transaction.atomic():
        task.save(force_insert=adding)
        # An edit clears beat's schedule-error flag and its alarm (services.alarms), after
        # the task's row is written: rows are locked in beat's order, task then state.
        flagged = previous is not None and schedule_errors_clear([task.pk]) > 0
        if previous is not None and (
            flagged or any(getattr(previous, f) != getattr(task, f) for f in FIRE_FIELDS)
        ):
            fires_ahead_drop([task.pk], now=now)
        schedule_changed = (
            previous is None
            or flagged  # the stored next fire may be what broke: plan it afresh
            or any(getattr(previous, f) != getattr(task, f) for f in SCHEDULE_FIELDS)
        )
        sync_schedule(task, now=now, replan=schedule_changed, by=requester(by))
        changes = {
            f: [plain(_shown(previous, f)) if previous else None, plain(_shown(task, f))]
            for f in (*TASK_FIELDS, "declared_in")
            if previous is None or getattr(previous, f) != getattr(task, f)
        }
        if adding or changes:
            audit(task.id, "created" if adding else "updated", by=by, changes=changes)
    return task


def _shown(task: Task, field: str) -> Any:
    """A field as the audit trail records it: secret payload fields as "set"."""
    return _masked(task.action, field, getattr(task, field))


def task_delete(*, task: Task, by: Actor = "") -> None:
    """Delete the task, its beat entry and its runs (run history goes with the task; the
    audit trail stays): the one-task case of :func:`tasks_delete`."""
    tasks_delete(tasks=[task], by=by)


def tasks_delete(
    *,
    tasks: Sequence[Task],
    by: Actor = "",
    owner: str | None = None,
    mark_beat_changed: bool = True,
) -> None:
    """Delete ``tasks``, their beat entries and their runs (run history goes with a task; the
    audit trail stays), in one transaction: a "deleted" entry each, the tasks in one
    statement, their beat entries in another, django-celery-beat's "changed" mark set once
    (unless ``mark_beat_changed`` is false: the caller sets it once for a larger set).

    A task declared in code is refused (``ConflictError``) unless ``owner`` is the module
    that declares it: ``manage.py tasks sync`` removing what that module no longer declares,
    each task released first (a "released" entry: "no longer declared in <module>"). Like
    :meth:`Task.delete`, the deleted tasks are left without a primary key."""
    by = permissions.authorize(by, "delete")
    for task in tasks:
        if owner is None or task.declared_in != owner:
            check_not_declared(task)
    ids = [t.pk for t in tasks]
    if not ids:
        return
    periodic_ids = [t.periodic_task_id for t in tasks if t.periodic_task_id is not None]
    released = f"no longer declared in {owner}"
    entries = [
        entry
        for task in tasks
        for entry in (
            *(
                (TaskAuditEntry(task_id=task.pk, event="released", by=by, note=released),)
                if owner is not None and task.declared_in == owner
                else ()
            ),
            TaskAuditEntry(task_id=task.pk, event="deleted", by=by),
        )
    ]
    # A sync's removal (``owner``) is part of the sync's all-or-nothing transaction: no
    # savepoint of its own and no second attempt (its tasks have no runs for a release or a
    # claim to meet).
    attempts = 1 if owner is not None else DELETE_ATTEMPTS
    for attempt in range(attempts):
        try:
            with transaction.atomic(savepoint=owner is None):
                audits(entries)
                Task.objects.filter(pk__in=ids).delete()
                # In one statement: PeriodicTask.delete() would mark PeriodicTasks changed
                # once per entry.
                if store.periodic_tasks_delete(ids=periodic_ids) and mark_beat_changed:
                    PeriodicTasks.update_changed()
            break
        except OperationalError as exc:
            # Deleting a task's runs while beat releases or a worker claims one of them
            # takes the same rows in the other order: Postgres aborts one side ("deadlock
            # detected"). The other side commits; deleting again then succeeds.
            if not isinstance(exc.__cause__, DeadlockDetected) or attempt == attempts - 1:
                raise
    for task in tasks:
        task.pk = None


# -- a checked set written at once (tasks_save) ---------------------------------------------


def _create_recurring(tasks: list[Task], *, module: str, by: str) -> None:
    """Insert ``tasks`` (new, recurring, checked) as one at a time would, one set at a time."""
    if not tasks:
        return
    now = clock.now()
    entries = beat_entries_fields(tasks)
    periodic = [PeriodicTask(**entries[t.pk]) for t in tasks]
    PeriodicTask.objects.bulk_create(periodic, batch_size=SET_BATCH)
    for task, entry in zip(tasks, periodic, strict=True):
        task.declared_in = module
        task.periodic_task = entry
    sets.tasks_copy(tasks=tasks)  # a trigger inserts each state row
    tasks_plan_fires(tasks, now=now, replan=set(tasks), batch=SET_BATCH)
    sets.audit_entries_copy(
        entries=(
            TaskAuditEntry(
                task_id=t.pk,
                event="created",
                by=by,
                changes={f: [None, _plain(_shown(t, f))] for f in (*TASK_FIELDS, "declared_in")},
            )
            for t in tasks
        ),
    )


def _update_recurring(tasks: list[Task], *, module: str, by: str) -> dict[str, Task]:
    """Write the changed definitions ``tasks`` (checked; each with its stored task's id) as
    one at a time would, where the stored and the new schedule both recur and the stored
    one has its beat entry; the stored tasks it wrote, by id (the others are left to the
    caller)."""
    if not tasks:
        return {}
    now = clock.now()
    stored = {
        t.pk: t
        for t in Task.objects.select_for_update(of=("self",))
        .select_related("periodic_task", "state")
        .filter(pk__in=[t.pk for t in tasks])
    }
    mine = [
        t
        for t in tasks
        if t.is_recurring
        and (previous := stored.get(t.pk)) is not None
        and previous.is_recurring
        and previous.periodic_task is not None
    ]
    if not mine:
        return {}
    replan: set[Task] = set()
    refire: list[str] = []
    cleared: list[str] = []
    entries_: list[TaskAuditEntry] = []
    loaded: list[Task] = []
    names = (*TASK_FIELDS, "declared_in")
    for desired in mine:
        # As one at a time: the stored task, its definition replaced.
        task = stored[desired.pk]
        before = {f: getattr(task, f) for f in names}
        for name in TASK_FIELDS:
            setattr(task, name, getattr(desired, name))
        task.declared_in = module
        task.payload = secret_fields.payload_merged(
            task.action, task.payload, stored_action=before["action"], stored=before["payload"]
        )
        flagged = bool(task.state.schedule_error)
        if flagged:  # an edit clears beat's schedule-error flag and its alarm
            cleared.append(task.pk)
        task.updated_at = now
        if flagged or any(before[f] != getattr(task, f) for f in SCHEDULE_FIELDS):
            replan.add(task)
        if flagged or any(before[f] != getattr(task, f) for f in FIRE_FIELDS):
            refire.append(task.pk)
        changes = {
            f: [
                _plain(_masked(before["action"], f, before[f])),
                _plain(_masked(task.action, f, getattr(task, f))),
            ]
            for f in names
            if before[f] != getattr(task, f)
        }
        if changes:
            entries_.append(
                TaskAuditEntry(task_id=task.pk, event="updated", by=by, changes=changes)
            )
        loaded.append(task)
    columns = [
        f.name
        for f in Task._meta.concrete_fields
        if not f.primary_key and f.name not in ("periodic_task", "created_at")
    ]
    Task.objects.bulk_update(loaded, columns, batch_size=1000)
    schedule_errors_clear(cleared)  # after the task rows: beat's lock order, task then state
    fires_ahead_drop(refire, now=now)
    tasks_plan_fires(loaded, now=now, replan=replan, batch=SET_BATCH)
    entries = beat_entries_fields(loaded)
    for task in loaded:
        entry = stored[task.pk].periodic_task
        assert entry is not None
        for name, value in entries[task.pk].items():
            setattr(entry, name, value)
        entry.date_changed = now
        if not entry.enabled:
            entry.last_run_at = None
        task.periodic_task = entry
    PeriodicTask.objects.bulk_update(
        [t.periodic_task for t in loaded if t.periodic_task is not None],
        [*next(iter(entries.values())), "date_changed", "last_run_at"],
        batch_size=1000,
    )
    TaskAuditEntry.objects.bulk_create(entries_, batch_size=SET_BATCH)
    return {t.pk: t for t in loaded}


def _masked(action: str, name: str, value: Any) -> Any:
    """A field as the audit trail records it: secret payload fields as "set"."""
    return secret_fields.payload_masked(action, value) if name == "payload" else value


def _plain(value: Any) -> Any:
    """``audit.plain``, without its JSON round trip for the values that need none."""
    if value is None or type(value) in (str, int, bool):
        return value
    return plain(value)


def task_pause(*, task: Task, note: str = "", by: Actor = "") -> Task:
    """Stop new fires and hold the task's delayed runs until it is resumed.

    The pause is written to the task's state row only (``task_paused``: status ``paused``,
    when, by whom, why); the task's own row, its configuration, is locked but not written,
    so an edit, a sync or the engine's auto-pause never overwrite one another's columns."""
    by = permissions.authorize(by, "pause")
    note = validation.check_pause_note(note)
    now = clock.now()
    with transaction.atomic():
        # Fires already due but not started will not run: pausing stops fires.
        # Rows are taken in the order every claim takes them (claim_run, and the overlap
        # check's lock): the runs', then the task's, then its state row; another order here
        # could deadlock with a claim. The task's row is locked so that beat, which fires a
        # batch holding its tasks' rows (beat.firing), either finishes that batch before
        # the pause (whose statements then drop the fires it recorded) or reads the pause.
        store.skip_paused_fires(task_id=task.pk, now=now)
        _lock_task_row(task)
        # Fires recorded ahead and not due yet are dropped (not skipped): a resume before
        # their instant records them again, so pausing for a minute skips only that minute.
        fires_ahead_drop([task.pk], now=now)
        store.task_paused(task_id=task.pk, now=now, by=by, note=note)
        task.load_state()
        sync_periodic_task(task)
        audit(task.id, "paused", by=by, note=note)
    return task


def task_resume(*, task: Task, by: Actor = "") -> Task:
    """Resume fires. Fires missed while paused go through the task's catch-up policy (the
    default ``skip`` replays none); held delayed runs are released. Like a pause, written to
    the task's state row only (``task_resumed``), after a lock on the task's row: beat's
    order, task then state."""
    by = permissions.authorize(by, "resume", action=task.action)
    now = clock.now()
    with transaction.atomic():
        _lock_task_row(task)
        store.task_resumed(task_id=task.pk)
        task.load_state()  # resumed: the beat entry the next call writes is enabled again
        sync_schedule(task, now=now, replan=False, by=requester(by))
        audit(task.id, "resumed", by=by)
    transaction.on_commit(release_due_runs)
    return task


def _lock_task_row(task: Task) -> None:
    """Lock the task's row until the transaction ends, without writing it."""
    list(Task.objects.select_for_update().filter(pk=task.pk).values_list("pk", flat=True))


def task_backfill(*, task: Task, start: datetime, end: datetime, by: Actor = "") -> list[Run]:
    """One run for each fire of the task's schedule in ``(start, end]``, due now.

    Fires already recorded (by beat or an earlier backfill) are not recorded again. More
    than ``TASKS_BACKFILL_MAX_RUNS`` fires is refused, nothing written.
    """
    by = permissions.authorize(by, "backfill", action=task.action)
    if not task.is_recurring:
        raise ValidationError({"schedule_type": ["backfill needs an interval or cron schedule"]})
    for name, value in (("start", start), ("end", end)):
        validation.check_instant(value, field=name)
    if end <= start:
        raise ValidationError({"end": ["must be after start"]})
    limit = app_settings.BACKFILL_MAX_RUNS
    anchor = task.state.next_run_at or task.created_at
    schedule = schedule_of(task, anchor=anchor)
    assert schedule is not None
    if isinstance(schedule, scheduling.IntervalSchedule):
        # Align on the schedule's own grid, however far back ``start`` lies.
        step = timedelta(seconds=schedule.seconds)
        back = (anchor - start) // step + 1 if start < anchor else 0
        schedule = scheduling.IntervalSchedule(
            seconds=schedule.seconds, anchor=anchor - back * step
        )
    fires = scheduling.fires_between(schedule, start, end, limit=limit + 1)
    if len(fires) > limit:
        raise ValidationError(
            {
                "end": [
                    f"the range holds more than {limit} fires (TASKS_BACKFILL_MAX_RUNS); narrow it"
                ]
            }
        )
    now = clock.now()
    runs = [
        new_run(
            task, trigger=Trigger.BACKFILL, due_at=now, scheduled_for=f, requested_by=requester(by)
        )
        for f in fires
    ]
    with transaction.atomic():
        existing = set(
            Run.objects.filter(
                task=task, scheduled_for__in=fires, trigger__in=[Trigger.SCHEDULE, Trigger.BACKFILL]
            ).values_list("scheduled_for", flat=True)
        )
        runs = [r for r in runs if r.scheduled_for not in existing]
        runs = runs_insert(runs)
        audit(
            task.id,
            "backfilled",
            by=by,
            note=f"{len(runs)} runs for {start.isoformat()} .. {end.isoformat()}",
        )
        ids = [r.id for r in runs]
        transaction.on_commit(lambda: publish_runs(ids))
    return runs


def task_execute(
    *,
    task: Task,
    trigger: str = Trigger.MANUAL,
    by: Actor = "",
    payload: Any = None,
    unique_key: str | None = None,
    unique_for_seconds: int | None = None,
    on_duplicate: str | None = None,
) -> Run:
    """Run the task now, with its own queue, priority, timeout and retry settings, and with
    ``payload`` instead of its own if given (:func:`run_payload`).

    A call with ``unique_key`` (or, without one, on a task whose policy names a key:
    ``unique_on``) is a unique call (``services.unique_calls``): while a run made with that
    key waits, the call gets that run (``Run.deduplicated``) or, with ``on_duplicate``
    ``replace``, replaces it."""
    name = permissions.authorize(by, "execute", action=task.action)
    check_runnable(task)
    call = unique_call(key=unique_key, for_seconds=unique_for_seconds, on_duplicate=on_duplicate)
    own = None if payload is None else run_payload(task, payload, by=by)
    if call is None:
        call = policy_call(task, task.payload if own is None else own)
    now = clock.now()
    return run_create(
        task=task,
        trigger=trigger,
        due_at=now,
        now=now,
        payload=own,
        requested_by=requester(name),
        unique=call,
    )


def run_payload(task: Task, payload: Any, *, by: Actor = "") -> dict[str, Any]:
    """A run's own ``payload`` that a person gives ("run now with..."), checked as the
    task's payload would be when saved (the action's schema and checks, what JSON and
    Postgres store); a masked secret field takes the task's value, where the origin it is
    bound to is unchanged (``secret_fields``). ``ValidationError`` on field ``payload``.
    Taking the task's secrets to another URL (origin or path) than the task's own needs what
    changing the task needs (``permissions.may_send_secrets_elsewhere``).

    Calling a function's task's own ``@task`` function with other arguments chooses no new
    code: ``TASKS_DJANGO_TASKS`` is asked only when the payload names another function."""
    if not isinstance(payload, dict):
        raise ValidationError({"payload": ["must be a JSON object"]})
    target, carried = secret_fields.secrets_sent_elsewhere(
        task.action, payload, stored=task.payload
    )
    if target and not permissions.may_send_secrets_elsewhere(by):
        raise ValidationError(
            {
                "payload": [
                    f'{target}: {", ".join(carried)} sent as "set" (the task\'s write-only '
                    f"values) go only to the task's own {target} (same origin and path; the "
                    f"query string may differ); sending them to another {target} needs "
                    f"{permissions.DESTINATION_CHANGE_PERMISSION}: send your own values, or "
                    f"keep the task's {target}"
                ]
            }
        )
    candidate = copy.copy(task)
    candidate.payload = secret_fields.payload_merged(
        task.action, payload, stored_action=task.action, stored=task.payload
    )
    own = django_task_paths.chosen_in_code(candidate, previous=task)
    with django_task_paths.own_function_checked(own):
        errors = validation.storable_errors(candidate)
        if not errors:
            try:
                validate_task(candidate, stored=(task.run_at, task.schedule_type))
            except ValidationError as exc:
                errors = exc.message_dict
    if errors:
        raise ValidationError({"payload": errors.get("payload") or sum(errors.values(), [])})
    return dict(candidate.payload)


def task_schedule_once(
    *,
    task: Task,
    delay_seconds: float | None = None,
    run_at: datetime | None = None,
    expires_in_seconds: float | None = None,
    expires_at: datetime | None = None,
    by: Actor = "",
    unique_key: str | None = None,
    unique_for_seconds: int | None = None,
    on_duplicate: str | None = None,
) -> Run:
    """One run after ``delay_seconds`` or at ``run_at`` (exactly one of them): a run of the
    task, later, so ``by`` needs what running it now needs. A unique call as
    :func:`task_execute` makes one."""
    name = permissions.authorize(by, "execute", action=task.action)
    check_runnable(task)
    call = unique_call(key=unique_key, for_seconds=unique_for_seconds, on_duplicate=on_duplicate)
    if call is None:
        call = policy_call(task, task.payload)
    now = clock.now()
    if delay_seconds is not None and run_at is not None:
        raise ValidationError({"delay_seconds": [validation.not_both("delay_seconds", "run_at")]})
    if delay_seconds is None and run_at is None:
        raise ValidationError({"delay_seconds": [validation.ONE_RUN_WHEN]})
    if delay_seconds is not None:
        due_at = now + validation.check_delay(delay_seconds)
        trigger = Trigger.DELAY
    else:
        assert run_at is not None
        due_at = validation.check_run_at(run_at, now=now)
        trigger = Trigger.AT
    deadline = check_expiry(
        expires_in_seconds=expires_in_seconds, expires_at=expires_at, due_at=due_at
    )
    return run_create(
        task=task,
        trigger=trigger,
        due_at=due_at,
        now=now,
        expires_at=deadline,
        requested_by=requester(name),
        unique=call,
    )


def _generate_task_id(action: str) -> str:
    return f"{action}-{secrets.token_hex(4)}"


def task_create_with_run(
    *,
    id: str | None,
    by: Actor,
    fields: dict[str, Any],
    delay_seconds: float | None = None,
    run_at: datetime | None = None,
    expires_in_seconds: float | None = None,
    expires_at: datetime | None = None,
) -> tuple[Task, Run | None]:
    """Create a task and, when a delay or an instant is given, its one run — together.

    One transaction: a bad delay rolls the new task back, so a reminder made in one request
    is written whole or not at all.
    """
    one_off = any(v is not None for v in (delay_seconds, run_at, expires_in_seconds, expires_at))
    if one_off:  # refused before anything is written, the task included
        by = permissions.authorize(
            by, "create", action=fields.get("action") or (), creates_run=True
        )
    with transaction.atomic():
        task = task_create(id=id, by=by, **fields)
        run = None
        if one_off:
            run = task_schedule_once(
                task=task,
                delay_seconds=delay_seconds,
                run_at=run_at,
                expires_in_seconds=expires_in_seconds,
                expires_at=expires_at,
                by=by,
            )
    if run is not None:
        task.refresh_from_db()
    return task, run
