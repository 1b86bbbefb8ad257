"""Writing tasks as sets (``services.tasks.tasks_save`` with many tasks, as ``manage.py tasks
sync`` writes a declared set): rows inserted with ``COPY`` instead of one statement holding
every value. Its statement is built from the model's columns, so it is not one of
``queries.sql``'s (the set's other statements are: ``store.periodic_tasks_delete``).

Each function takes its values as keyword arguments and runs on Django's connection, inside
whatever transaction is open there; errors are Django's, as for the ORM.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection, models

from ..models import Task, TaskAuditEntry


def tasks_copy(*, tasks: Iterable[Task]) -> None:
    """Insert ``tasks`` (new) with ``COPY``: the rows ``bulk_create`` inserts, each task's
    state row inserted by the table's trigger."""
    _copy(Task, tasks)


def audit_entries_copy(*, entries: Iterable[TaskAuditEntry]) -> None:
    """Insert ``entries`` (new audit entries) with ``COPY``; their ids are the database's."""
    _copy(TaskAuditEntry, entries)


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
