"""The SQL of writing tasks as sets (``services.tasks.tasks_save`` and ``tasks_delete`` with
many tasks, as ``manage.py tasks sync`` writes a declared set): rows inserted with ``COPY``
instead of one statement holding every value, beat entries deleted in one statement, and
the transaction-level lock that makes two syncs apply one after the other.

Each function takes its values as keyword arguments and runs on Django's connection, inside
whatever transaction is open there; errors are Django's, as for the ORM.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection, models
from django_celery_beat.models import PeriodicTask

from ..models import Task, TaskAuditEntry


def tasks_copy(*, tasks: Iterable[Task]) -> None:
    """Insert ``tasks`` (new) with ``COPY``: the rows ``bulk_create`` inserts, each task's
    state row inserted by the table's trigger."""
    _copy(Task, tasks)


def audit_entries_copy(*, entries: Iterable[TaskAuditEntry]) -> None:
    """Insert ``entries`` (new audit entries) with ``COPY``; their ids are the database's."""
    _copy(TaskAuditEntry, entries)


def periodic_tasks_delete(*, ids: list[int]) -> int:
    """Delete the beat entries ``ids`` in one statement, without django-celery-beat's signal
    that marks ``PeriodicTasks`` changed once per entry (the caller marks it once); how many
    were deleted."""
    if not ids:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {PeriodicTask._meta.db_table} WHERE id = ANY(%s)",  # noqa: S608
            [ids],
        )
        return int(cursor.rowcount)


def sync_lock(*, key: int) -> None:
    """Take the transaction-level advisory lock ``key`` (held until the transaction ends):
    a second holder waits."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])


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
