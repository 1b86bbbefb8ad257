"""The mirror of a task's schedule, kept in line with the task: its ``next_run_at``, the run a
``once`` task owns, and the django-celery-beat entry a recurring task owns (its fields are
:func:`beat_entry_fields`'s, whoever writes it: one task at a time or a set at
once, ``services.tasks.tasks_save``)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

from .. import store
from ..models import Run, RunStatus, ScheduleType, Task, TaskState, Trigger
from ..timing import scheduling
from ..timing.task_schedule import planned_fire
from .run_create import run_create
from .run_release import enqueue_on_commit

# The Celery task a django-celery-beat entry names ("run now" from its admin).
EXECUTE_TASK = "tasks_app.execute_task"
# The names of the entries tasks own: ``task:<id>``. Beat's stock path fires the other
# entries and finds them through an index of the names without it (migration 0018), so
# the entries of a million tasks are never read at its start-up or reloads.
OWNED_ENTRY_PREFIX = "task:"


def owned_entry_name(task_id: str) -> str:
    return f"{OWNED_ENTRY_PREFIX}{task_id}"


def sync_schedule(task: Task, *, now: datetime, replan: bool, by: str = "") -> None:
    """Bring ``next_run_at``, the beat entry and a 'once' task's run in line with the task
    (a run it creates is asked for by ``by``: who saved the task)."""
    if task.is_recurring:
        # One statement on the state row (task_plan_fires), deciding on the row as it is
        # when locked: a run finishing meanwhile keeps the status it wrote.
        fire = planned_fire(task, now=now, fire_count=_fire_counts([task]).get(task.pk, 0))
        store.task_plan_fires(task_id=task.pk, replan=replan, first_fire=fire)
        task.load_state()
    elif task.schedule_type == ScheduleType.ONCE and replan:
        _sync_once_run(task, now=now, by=by)
    elif replan:
        store.task_refresh_next_run(task_id=task.pk)
        task.load_state()
    sync_periodic_task(task)


def tasks_plan_fires(tasks: list[Task], *, now: datetime, replan: set[Task], batch: int) -> None:
    """``task_plan_fires`` of a set of tasks in statements of ``batch`` tasks
    (``tasks_plan_fires``): each task's first fire from ``now`` if it is in ``replan``. The
    set writes of ``services.tasks.tasks_save`` plan with it."""
    for start in range(0, len(tasks), batch):
        chunk = tasks[start : start + batch]
        counts = _fire_counts(chunk)
        store.tasks_plan_fires(
            [
                store.PlannedFire(
                    t.pk, t in replan, planned_fire(t, now=now, fire_count=counts.get(t.pk, 0))
                )
                for t in chunk
            ]
        )


def _fire_counts(tasks: list[Task]) -> dict[str, int]:
    """The fires recorded so far of those of ``tasks`` with ``max_runs`` (the others' count
    decides nothing), read as stored now: after the fires dropped ahead of an edit were
    taken off, while the caller holds the task rows, which beat locks before it counts a
    fire."""
    ids = [t.pk for t in tasks if t.max_runs is not None]
    if not ids:
        return {}
    return dict(TaskState.objects.filter(pk__in=ids).values_list("pk", "fire_count"))


def fires_ahead_drop(task_ids: Iterable[str], *, now: datetime) -> None:
    """Remove the fires of ``task_ids`` recorded ahead of their instant (``drop_fires_ahead``):
    the tasks were paused or what their fires are changed, before the fires came due. Beat
    records fires up to ``TASKS_FIRE_AHEAD_SECONDS`` ahead of a busy instant (and releases
    them early, with their exact ETA), so without this an edit or a pause made in that
    minute would be ignored by fires already recorded. Call after the task rows are written."""
    ids = list(task_ids)
    if ids:
        store.drop_fires_ahead(task_ids=ids, now=now)


def _sync_once_run(task: Task, *, now: datetime, by: str) -> None:
    """A 'once' task owns one run at ``run_at``: move it while it waits, or create it."""
    assert task.run_at is not None
    waiting = task.runs.filter(trigger=Trigger.AT, status=RunStatus.PENDING).first()
    if waiting is not None:
        store.move_waiting_run(run_id=waiting.pk, due_at=task.run_at)
        store.task_refresh_next_run(task_id=task.pk)
        enqueue_on_commit(Run.objects.select_related("task").get(pk=waiting.pk), now=now)
    else:
        run_create(task=task, trigger=Trigger.AT, due_at=task.run_at, now=now, requested_by=by)
    task.load_state()


def beat_entry_fields(task: Task) -> dict[str, Any]:
    """The fields of the beat entry ``task`` owns, its schedule row aside (the one mapping
    from a task to its ``PeriodicTask``: :func:`sync_periodic_task` writes one entry with
    it, :func:`beat_entries_fields` a set's). Empty values as ``PeriodicTask.save`` stores
    them."""
    return {
        "name": owned_entry_name(task.id),
        "task": EXECUTE_TASK,
        "kwargs": json.dumps({"task_id": task.id}),
        "enabled": not task.paused,
        "queue": task.queue or None,
        "exchange": None,
        "routing_key": None,
        "priority": task.priority,
        "description": f"Owned by task {task.id}; edit the task, not this entry.",
    }


def crontab_fields(task: Task) -> dict[str, str]:
    """The ``CrontabSchedule`` a cron task's entry points at: its five fields (a macro such
    as ``@daily`` expanded) and its time zone."""
    fields = scheduling.parse_cron(task.cron)
    minute, hour, dom, month, dow = scheduling.expand_macro(fields.text).split()
    return {
        "minute": minute,
        "hour": hour,
        "day_of_month": dom,
        "month_of_year": month,
        "day_of_week": dow,
        "timezone": str(task.timezone),
    }


def sync_periodic_task(task: Task) -> None:
    """The django-celery-beat entry a recurring task owns, written from :func:`beat_entry_fields`
    (as a set's entries are, in bulk, by ``services.tasks.tasks_save``)."""
    if not task.is_recurring:
        if task.periodic_task_id:
            periodic = task.periodic_task
            Task.objects.filter(pk=task.pk).update(periodic_task=None)
            task.periodic_task = None
            if periodic is not None:
                periodic.delete()
        return
    interval = crontab = None
    if task.schedule_type == ScheduleType.INTERVAL:
        interval, _ = IntervalSchedule.objects.get_or_create(
            every=task.interval_seconds, period=IntervalSchedule.SECONDS
        )
    else:
        crontab, _ = CrontabSchedule.objects.get_or_create(**crontab_fields(task))
    values = {**beat_entry_fields(task), "interval": interval, "crontab": crontab}
    periodic = task.periodic_task
    if periodic is None:
        periodic = PeriodicTask.objects.create(**values)
        task.periodic_task = periodic
        Task.objects.filter(pk=task.pk).update(periodic_task=periodic)
    else:
        for name, value in values.items():
            setattr(periodic, name, value)
        periodic.save()


# -- beat entries of a set of tasks ----------------------------------------------------------

CronKey = tuple[str, str, str, str, str, str]
BATCH = 5000


def beat_entries_fields(tasks: list[Task]) -> dict[str, dict[str, Any]]:
    """Each recurring task's beat entry as :func:`sync_periodic_task` writes it (field:
    value, by task id), with the schedules' rows looked up or created once per distinct
    schedule: what a set of tasks written at once (``services.tasks.tasks_save``) needs."""
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
