"""A declared set written as sets (``tasks sync``): the rows ``task_save`` and
``task_delete`` write one task at a time, written here in a few statements for the whole set.

:func:`create_recurring` inserts new interval and cron tasks with their beat entries
(django-celery-beat's ``IntervalSchedule`` / ``CrontabSchedule`` rows looked up or created
once per distinct schedule, one ``PeriodicTask`` per task, as ``sync_periodic_task`` writes
it), plans their first fires in one statement (``tasks_plan_fires``) and writes their
"created" audit entries. :func:`remove_unused` releases and deletes removed tasks that never
ran, with their beat entries and both audit entries. Neither marks django-celery-beat's
``PeriodicTasks`` changed: the caller does that once for the whole set.

The definitions were checked before (``schedules.sync.schedules_plan``): nothing here
validates again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connection, models
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

from ..models import Run, ScheduleType, Task, TaskAuditEntry
from ..runtime import clock
from ..services.alarms import schedule_errors_clear
from ..services.audit import plain
from ..services.schedule_mirror import (
    beat_entry_fields,
    crontab_fields,
    fires_ahead_drop,
    tasks_plan_fires,
)
from ..services.task_operations import FIRE_FIELDS, SCHEDULE_FIELDS, TASK_FIELDS
from ..vocabulary import secret_fields

BATCH = 5000

CronKey = tuple[str, str, str, str, str, str]


def create_recurring(tasks: list[Task], *, module: str, by: str) -> None:
    """Insert ``tasks`` (new, recurring, checked) as ``task_save`` would, one set at a time."""
    if not tasks:
        return
    now = clock.now()
    entries = _entries(tasks)
    periodic = [PeriodicTask(**entries[t.pk]) for t in tasks]
    PeriodicTask.objects.bulk_create(periodic, batch_size=BATCH)
    for task, entry in zip(tasks, periodic, strict=True):
        task.declared_in = module
        task.periodic_task = entry
    _copy(Task, tasks)  # a trigger inserts each state row
    tasks_plan_fires(tasks, now=now, replan=set(tasks), batch=BATCH)
    _copy(
        TaskAuditEntry,
        (
            TaskAuditEntry(
                task_id=t.pk,
                event="created",
                by=by,
                changes={f: [None, _plain(_shown(t, f))] for f in (*TASK_FIELDS, "declared_in")},
            )
            for t in tasks
        ),
    )


def update_recurring(tasks: list[Task], *, module: str, by: str) -> set[str]:
    """Write the changed definitions ``tasks`` (checked; each with its stored task's id)
    as ``task_save`` would, where the stored and the new schedule both recur and the stored
    one has its beat entry; the ids it wrote (the others are left to the caller)."""
    if not tasks:
        return set()
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
        return set()
    replan: set[Task] = set()
    refire: list[str] = []
    cleared: list[str] = []
    audits: list[TaskAuditEntry] = []
    loaded: list[Task] = []
    for desired in mine:
        # As the per-task path does: the stored task, its definition replaced.
        task = stored[desired.pk]
        names = (*TASK_FIELDS, "declared_in")
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
            audits.append(TaskAuditEntry(task_id=task.pk, event="updated", by=by, changes=changes))
        loaded.append(task)
    mine = loaded
    columns = [
        f.name
        for f in Task._meta.concrete_fields
        if not f.primary_key and f.name not in ("periodic_task", "created_at")
    ]
    Task.objects.bulk_update(mine, columns, batch_size=1000)
    schedule_errors_clear(cleared)  # after the task rows: beat's lock order, task then state
    fires_ahead_drop(refire, now=now)
    tasks_plan_fires(mine, now=now, replan=replan, batch=BATCH)
    entries = _entries(mine)
    for task in mine:
        entry = stored[task.pk].periodic_task
        assert entry is not None
        for name, value in entries[task.pk].items():
            setattr(entry, name, value)
        entry.date_changed = now
        if not entry.enabled:
            entry.last_run_at = None
        task.periodic_task = entry
    PeriodicTask.objects.bulk_update(
        [t.periodic_task for t in mine if t.periodic_task is not None],
        [*next(iter(entries.values())), "date_changed", "last_run_at"],
        batch_size=1000,
    )
    TaskAuditEntry.objects.bulk_create(audits, batch_size=BATCH)
    return {t.pk for t in mine}


def remove_unused(task_ids: Iterable[str], *, module: str, by: str) -> set[str]:
    """Release and delete the tasks of ``task_ids`` that have no runs (and their beat
    entries), as ``tasks sync`` removes one; the ids it removed. Tasks with runs are left
    to the caller (they are paused, not deleted)."""
    ids = list(task_ids)
    if not ids:
        return set()
    with_runs = set(
        Run.objects.filter(task_id__in=ids).values_list("task_id", flat=True).distinct()
    )
    gone = [i for i in ids if i not in with_runs]
    if not gone:
        return set()
    periodic_ids = list(
        Task.objects.filter(pk__in=gone, periodic_task__isnull=False).values_list(
            "periodic_task_id", flat=True
        )
    )
    note = f"no longer declared in {module}"
    TaskAuditEntry.objects.bulk_create(
        (
            entry
            for task_id in gone
            for entry in (
                TaskAuditEntry(task_id=task_id, event="released", by=by, note=note),
                TaskAuditEntry(task_id=task_id, event="deleted", by=by),
            )
        ),
        batch_size=BATCH,
    )
    Task.objects.filter(pk__in=gone).delete()
    if periodic_ids:
        # In SQL: PeriodicTask.delete() would mark PeriodicTasks changed once per entry.
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {PeriodicTask._meta.db_table} WHERE id = ANY(%s)",  # noqa: S608
                [periodic_ids],
            )
    return set(gone)


def _copy(model: type[models.Model], objects: Iterable[models.Model]) -> None:
    """Insert ``objects`` with ``COPY``: the rows ``bulk_create`` inserts (the same values,
    ``auto_now_add`` included; an automatic primary key left to the database), without
    building one statement holding every value."""
    fields = [
        f
        for f in model._meta.concrete_fields
        if not (f.primary_key and isinstance(f, models.AutoField | models.BigAutoField))
    ]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    sql = f"COPY {connection.ops.quote_name(model._meta.db_table)} ({columns}) FROM STDIN"
    with connection.cursor() as cursor, connection.wrap_database_errors:
        with cursor.cursor.copy(sql) as copy:
            for obj in objects:
                copy.write_row(
                    [f.get_db_prep_save(f.pre_save(obj, add=True), connection) for f in fields]
                )


def _entries(tasks: list[Task]) -> dict[str, dict[str, Any]]:
    """Each task's beat entry as ``sync_periodic_task`` writes it (field: value), with the
    schedules' rows looked up or created once per distinct schedule."""
    intervals = _intervals({t.interval_seconds for t in tasks if _is_interval(t)})
    crons = {t.pk: _cron_key(t) for t in tasks if not _is_interval(t)}
    crontabs = _crontabs(set(crons.values()))
    return {
        t.pk: {
            **beat_entry_fields(t),
            "interval_id": intervals[t.interval_seconds] if _is_interval(t) else None,
            "crontab_id": None if _is_interval(t) else crontabs[crons[t.pk]],
        }
        for t in tasks
    }


def _is_interval(task: Task) -> bool:
    return task.schedule_type == ScheduleType.INTERVAL


def _shown(task: Task, name: str) -> Any:
    return _masked(task.action, name, getattr(task, name))


def _masked(action: str, name: str, value: Any) -> Any:
    """A field as the audit trail records it: secret payload fields as "set"."""
    return secret_fields.payload_masked(action, value) if name == "payload" else value


def _plain(value: Any) -> Any:
    """``audit.plain``, without its JSON round trip for the values that need none."""
    if value is None or type(value) in (str, int, bool):
        return value
    return plain(value)


def _cron_key(task: Task) -> CronKey:
    minute, hour, dom, month, dow, zone = crontab_fields(task).values()
    return (minute, hour, dom, month, dow, zone)


def _intervals(seconds: set[int | None]) -> dict[int | None, int]:
    """``IntervalSchedule`` ids by seconds, created where missing (``get_or_create``)."""
    found: dict[int | None, int] = {}
    for every, pk in (
        IntervalSchedule.objects.filter(period=IntervalSchedule.SECONDS, every__in=seconds)
        .order_by("-pk")
        .values_list("every", "pk")
    ):
        found[every] = pk
    missing = [
        IntervalSchedule(every=every, period=IntervalSchedule.SECONDS)
        for every in sorted(s for s in seconds - set(found) if s is not None)
    ]
    IntervalSchedule.objects.bulk_create(missing, batch_size=BATCH)
    found.update({entry.every: entry.pk for entry in missing})
    return found


def _crontabs(keys: set[CronKey]) -> dict[CronKey, int]:
    """``CrontabSchedule`` ids by their fields and zone, created where missing."""
    found: dict[CronKey, int] = {}
    if not keys:
        return found
    for *values, pk in (
        CrontabSchedule.objects.filter(
            minute__in={k[0] for k in keys},
            hour__in={k[1] for k in keys},
            timezone__in={k[5] for k in keys},
        )
        .order_by("-pk")
        .values_list(
            "minute", "hour", "day_of_month", "month_of_year", "day_of_week", "timezone", "pk"
        )
    ):
        key = _key(values)
        if key in keys:
            found[key] = pk
    missing_keys = sorted(keys - set(found))
    missing = [
        CrontabSchedule(
            minute=k[0],
            hour=k[1],
            day_of_month=k[2],
            month_of_year=k[3],
            day_of_week=k[4],
            timezone=k[5],
        )
        for k in missing_keys
    ]
    CrontabSchedule.objects.bulk_create(missing, batch_size=BATCH)
    found.update({k: entry.pk for k, entry in zip(missing_keys, missing, strict=True)})
    return found


def _key(values: list[Any]) -> CronKey:
    minute, hour, dom, month, dow, zone = values
    return (minute, hour, dom, month, dow, str(zone))
