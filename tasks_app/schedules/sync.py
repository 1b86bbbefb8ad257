"""Schedules declared in code (``tasks_app.schedules.Schedule``) made the database's tasks.

``schedules_plan`` reads ``SCHEDULES`` from ``TASKS_SCHEDULES_MODULE``, checks every
definition with the rules every task passes (unknown keywords, value types, then the model's
field validators and ``task_rules.validate_task``, as a ``POST /api/tasks`` does), and
compares the result with the database, field by field. ``schedules_apply`` writes a plan in
one transaction, holding a lock so that two releases cannot apply at once: every definition
is written, or (any definition refused, any write failing) none.

Ownership: a task written by a sync has ``declared_in`` set to the module; the services
then refuse to change or delete its definition from anywhere else (``ConflictError``, a 409
in the API), while running it now, pausing, resuming and backfilling stay open to operators
(its pause is not part of the definition, so a sync leaves it as it is). A task of the same
id created by hand is taken over by the first sync that declares it.

A code-owned task whose definition is gone stops: one that never ran is deleted; one with
runs is paused (pending fires skipped) and handed back to the admin, so its history stays
until retention or an operator deletes it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django_celery_beat.models import PeriodicTasks

from .. import store
from ..conf import app_settings
from ..models import Run, Task
from ..services import django_task_paths
from ..services.audit import audit, plain
from ..services.task_operations import (
    TASK_FIELDS,
    task_delete,
    task_pause,
    task_save,
    tasks_delete,
    tasks_save,
)
from ..services.task_rules import validate_task
from .definition import Schedule

SYNC_BY = "tasks sync"
# The transaction-level advisory lock of a sync: two releases at once apply one after the other.
SYNC_LOCK_KEY = 0x7461736B73796E63  # "tasksync"


class SchedulesError(Exception):
    """The declared set cannot be applied; ``lines`` name each definition and field."""

    def __init__(self, module: str, lines: list[str]):
        super().__init__(f"{module}: " + "; ".join(lines))
        self.module = module
        self.lines = lines


@dataclass
class Change:
    """One task to create, update or remove, with its fields' ``(database, code)`` values."""

    kind: str  # "create" | "update" | "remove"
    task_id: str
    fields: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    desired: Task | None = None
    note: str = ""


@dataclass
class Plan:
    module: str
    declared: int
    changes: list[Change]

    @property
    def empty(self) -> bool:
        return not self.changes

    def count(self, kind: str) -> int:
        return sum(1 for c in self.changes if c.kind == kind)

    def lines(self) -> list[str]:
        """The plan as text: one header line per task, then one line per field."""
        out: list[str] = []
        for change in self.changes:
            out.append(
                f"{change.kind} {change.task_id}" + (f" ({change.note})" if change.note else "")
            )
            for name, (old, new) in change.fields.items():
                if change.kind == "create":
                    out.append(f"    {name}: {show(new)}")
                else:
                    out.append(f"    {name}: {show(old)} -> {show(new)}")
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "declared": self.declared,
            "changes": [
                {
                    "change": c.kind,
                    "id": c.task_id,
                    "note": c.note,
                    "fields": {
                        name: {"database": plain(old), "code": plain(new)}
                        for name, (old, new) in c.fields.items()
                    },
                }
                for c in self.changes
            ],
        }

    def summary(self, *, applied: bool = False) -> str:
        if self.empty:
            return f"{self.module}: the database matches its {self.declared} schedules"
        done = (
            ("created", "updated", "removed")
            if applied
            else ("to create", "to update", "to remove")
        )
        counts = ", ".join(
            f"{self.count(kind)} {word}"
            for kind, word in zip(("create", "update", "remove"), done, strict=True)
        )
        return f"{self.module}: {counts} ({self.declared} declared)"


def show(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    return repr(value)


def schedules_module() -> str:
    return app_settings.SCHEDULES_MODULE


def schedules_load(module: str | None = None) -> tuple[str, list[Schedule]]:
    """The module's ``SCHEDULES``; :class:`SchedulesError` when it cannot be read."""
    module = module or schedules_module()
    try:
        loaded = importlib.import_module(module)
    except ImportError as exc:
        raise SchedulesError(
            module, [f"cannot import it (setting TASKS_SCHEDULES_MODULE): {exc}"]
        ) from exc
    declared = getattr(loaded, "SCHEDULES", None)
    if not isinstance(declared, list | tuple):
        raise SchedulesError(module, ["SCHEDULES: must be a list of tasks_app.schedules.Schedule"])
    wrong = [
        f"SCHEDULES[{i}]: must be a tasks_app.schedules.Schedule, not {type(item).__name__}"
        for i, item in enumerate(declared)
        if not isinstance(item, Schedule)
    ]
    if wrong:
        raise SchedulesError(module, wrong)
    return module, list(declared)


def schedules_plan(module: str | None = None) -> Plan:
    """What a sync would change; :class:`SchedulesError` naming every refused definition."""
    module, declared = schedules_load(module)
    existing = {t.pk: t for t in Task.objects.filter(pk__in=[s.id for s in declared])}
    owned = set(Task.objects.exclude(declared_in="").values_list("pk", flat=True))
    errors: list[str] = []
    desired: list[Task] = []
    seen: set[str] = set()
    for schedule in declared:
        if schedule.id in seen:
            errors.append(f"{schedule.id}: id: declared more than once")
            continue
        seen.add(schedule.id)
        try:
            desired.append(_desired_task(schedule, module, existing.get(str(schedule.id))))
        except ValidationError as exc:
            errors += [
                f"{schedule.id}: {name}: {message}"
                for name, messages in _message_dict(exc).items()
                for message in messages
            ]
    if errors:
        raise SchedulesError(module, errors)
    changes = [c for task in desired if (c := _compare(task, existing.get(task.pk)))]
    removed = sorted(owned - seen)
    with_runs = set(
        Task.objects.filter(pk__in=removed, runs__isnull=False).values_list("pk", flat=True)
    )
    changes += [
        Change(
            "remove",
            task_id,
            note="paused and handed back to the admin; its runs are kept"
            if task_id in with_runs
            else "deleted; it has no runs",
        )
        for task_id in removed
    ]
    return Plan(module=module, declared=len(declared), changes=changes)


def schedules_apply(plan: Plan, *, bulk: bool = True) -> None:
    """Write ``plan`` in one transaction (nothing is written if any write fails).

    ``bulk`` (the default) hands the services the set: the removed tasks without runs to
    ``tasks_delete``, the new and changed definitions to ``tasks_save`` as a checked set,
    which writes the recurring ones in a few statements for the whole set instead of some
    twenty per task (the rows one at a time writes, django-celery-beat's "changed" mark set
    once) and the others (``once`` and on-demand tasks, a schedule that starts or stops
    recurring) one at a time; the removed tasks with runs are then paused one at a time.
    ``bulk=False`` sends every change through the one-task services, one at a time."""
    with transaction.atomic():
        if not bulk:
            for change in plan.changes:
                _apply(change, module=plan.module)
            return
        removed = [c.task_id for c in plan.changes if c.kind == "remove"]
        gone = _remove_unused(removed, module=plan.module)
        # django-celery-beat's "changed" mark: once for the whole set
        tasks_save(
            tasks=[
                c.desired
                for c in plan.changes
                if c.kind in ("create", "update") and c.desired is not None
            ],
            by=SYNC_BY,
            owner=plan.module,
            checked=True,
            mark_beat_changed=not gone,
        )
        for change in plan.changes:
            if change.kind == "remove" and change.task_id not in gone:
                _apply(change, module=plan.module)
        if gone:
            PeriodicTasks.update_changed()


def schedules_sync(module: str | None = None) -> Plan:
    """Plan and apply in one transaction, under a lock: a second sync at the same time
    (two releases) waits, then plans against what the first one wrote. Returns the plan
    that was applied."""
    with transaction.atomic():
        store.sync_lock(key=SYNC_LOCK_KEY)
        plan = schedules_plan(module)
        schedules_apply(plan)
    return plan


# -- a definition as a task ----------------------------------------------------------------


def _desired_task(schedule: Schedule, module: str, current: Task | None) -> Task:
    if not isinstance(schedule.id, str):
        raise ValidationError({"id": ["must be a string"]})
    unknown = sorted(set(schedule.fields) - set(TASK_FIELDS))
    if unknown:
        raise ValidationError({name: ["unknown field"] for name in unknown})
    if "action" not in schedule.fields:
        raise ValidationError({"action": ["this field is required"]})
    values: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    for name in TASK_FIELDS:
        model_field = _field(name)
        if name not in schedule.fields:
            values[name] = model_field.get_default()
            continue
        try:
            values[name] = _typed(model_field, schedule.fields[name])
        except ValidationError as exc:
            errors[name] = exc.messages
    if errors:
        raise ValidationError(errors)
    task = Task(id=schedule.id, declared_in=module, **values)
    stored = None
    if current is not None:
        task._state.adding = False
        stored = (current.run_at, current.schedule_type)
    # What ``Model.full_clean`` does (field validators, then the rules spanning fields),
    # with the stored schedule read once for the whole set instead of once per task.
    try:
        task.clean_fields()
    except ValidationError as exc:
        errors.update(_message_dict(exc))
    try:
        task.clean()  # what Postgres cannot store (a NUL character)
    except ValidationError as exc:
        for name, messages in _message_dict(exc).items():
            errors.setdefault(name, messages)
    try:  # its own @task function (``function_policy``) is chosen in code, as task_save has it
        with django_task_paths.own_function_checked(
            django_task_paths.chosen_in_code(task, previous=current, declared=True)
        ):
            validate_task(task, stored=stored)
    except ValidationError as exc:
        for name, messages in _message_dict(exc).items():
            errors.setdefault(name, messages)
    if errors:
        raise ValidationError(errors)
    return task


def _field(name: str) -> models.Field[Any, Any]:
    return cast("models.Field[Any, Any]", Task._meta.get_field(name))


def _typed(model_field: Any, value: Any) -> Any:
    """``value`` if it has the field's type (what the API's JSON typing refuses, refused
    here too: ``"5"`` is not a number, ``1`` is not a boolean)."""
    if value is None:
        if model_field.null:
            return None
        raise ValidationError("may not be None")
    if isinstance(model_field, models.BooleanField):
        ok = isinstance(value, bool)
        wanted = "true or false"
    elif isinstance(model_field, models.IntegerField):
        ok = isinstance(value, int) and not isinstance(value, bool)
        wanted = "an integer"
    elif isinstance(model_field, models.DateTimeField):
        if isinstance(value, str):
            parsed = parse_datetime(value)
            if parsed is None:
                raise ValidationError("must be a datetime or an ISO 8601 string")
            value = parsed
        if not isinstance(value, datetime):
            raise ValidationError("must be a datetime or an ISO 8601 string")
        if timezone.is_naive(value):
            raise ValidationError("must include a time zone (e.g. tzinfo=datetime.UTC)")
        return value
    elif isinstance(model_field, models.JSONField):
        ok = isinstance(value, dict)
        wanted = "a dict (a JSON object)"
    else:
        ok = isinstance(value, str)
        wanted = "a string"
    if not ok:
        raise ValidationError(f"must be {wanted}, not {type(value).__name__}")
    return value


def _message_dict(exc: ValidationError) -> dict[str, list[str]]:
    if hasattr(exc, "error_dict"):
        return {
            ("definition" if name == "__all__" else name): messages
            for name, messages in exc.message_dict.items()
        }
    return {"definition": exc.messages}


def _compare(task: Task, current: Task | None) -> Change | None:
    if current is None:
        given = {
            name: (None, getattr(task, name))
            for name in TASK_FIELDS
            if getattr(task, name) != _field(name).get_default()
        }
        return Change("create", task.pk, fields=given, desired=task)
    differing = {
        name: (getattr(current, name), getattr(task, name))
        for name in TASK_FIELDS
        if getattr(current, name) != getattr(task, name)
    }
    note = ""
    if current.declared_in != task.declared_in:
        note = (
            f"taken over from {current.declared_in}"
            if current.declared_in
            else "taken over from the admin: read-only there from now on"
        )
    if not differing and not note:
        return None
    return Change("update", task.pk, fields=differing, desired=task, note=note)


def _apply(change: Change, *, module: str) -> None:
    if change.kind == "create":
        assert change.desired is not None
        task_save(task=change.desired, by=SYNC_BY, owner=module)
        return
    current = Task.objects.select_for_update().get(pk=change.task_id)
    if change.kind == "update":
        assert change.desired is not None
        for name in TASK_FIELDS:
            setattr(current, name, getattr(change.desired, name))
        current.declared_in = module
        task_save(task=current, by=SYNC_BY, owner=module)
        return
    _remove(current, module=module)


def _remove_unused(task_ids: list[str], *, module: str) -> set[str]:
    """Release and delete (``tasks_delete``, as a set) the tasks of ``task_ids`` that have no
    runs; the ids it removed. Tasks with runs are left to the caller (paused, not deleted),
    and so is django-celery-beat's "changed" mark."""
    if not task_ids:
        return set()
    with_runs = set(
        Run.objects.filter(task_id__in=task_ids).values_list("task_id", flat=True).distinct()
    )
    gone = [i for i in task_ids if i not in with_runs]
    if not gone:
        return set()
    stored = {
        t.pk: t for t in Task.objects.filter(pk__in=gone).only("pk", "declared_in", "periodic_task")
    }
    tasks_delete(tasks=[stored[i] for i in gone], by=SYNC_BY, owner=module, mark_beat_changed=False)
    return set(gone)


def _remove(task: Task, *, module: str) -> None:
    Task.objects.filter(pk=task.pk).update(declared_in="")
    task.declared_in = ""
    audit(task.pk, "released", by=SYNC_BY, note=f"no longer declared in {module}")
    if not task.runs.exists():
        task_delete(task=task, by=SYNC_BY)
    elif not task.paused:
        task_pause(task=task, note=f"no longer declared in {module}", by=SYNC_BY)
