"""Runs and task states are written only by the store's named statements: read from the
source (no database), no module of ``tasks_app`` outside ``tasks_app/store`` (migrations
aside) inserts, updates or deletes them through the ORM. Beat's fires, a backfill and the
failure streak included; a status write at run time is refused besides
(tests/unit/test_architecture.py)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "tasks_app"
GUARDED = {"Run", "TaskState"}
# Managers that lead to those rows from another model: ``task.runs``, ``run.retries``.
RELATED = {"runs", "retries"}
WRITES = {
    "create",
    "bulk_create",
    "update",
    "bulk_update",
    "delete",
    "get_or_create",
    "update_or_create",
    "raw",
}


def _root(node: ast.expr) -> tuple[str | None, bool]:
    """The name a chain of calls and attributes starts from, and whether it passes through
    ``.objects`` or a related manager of the guarded models."""
    via_manager = False
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            via_manager = via_manager or node.attr in RELATED or node.attr == "objects"
            if node.attr in RELATED:
                return "Run", True
            node = node.value
        elif isinstance(node, ast.Name):
            return node.id, via_manager
        else:
            return None, via_manager


def orm_writes(source: str) -> list[str]:
    """``Model.objects....write(...)`` calls on the guarded models in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in WRITES:
            continue
        name, via_manager = _root(node.func.value)
        if name in GUARDED and via_manager:
            found.append(f"{node.lineno}: {ast.unparse(node)[:100]}")
    return found


def test_no_module_outside_the_store_writes_runs_or_task_states_through_the_orm() -> None:
    offenders = {
        str(path.relative_to(PACKAGE)): writes
        for path in PACKAGE.rglob("*.py")
        if "migrations" not in path.parts and "store" not in path.parts
        if (writes := orm_writes(path.read_text()))
    }
    assert offenders == {}


def test_the_scan_finds_a_write_however_it_is_spelled() -> None:
    assert orm_writes("Run.objects.bulk_create(runs)")
    assert orm_writes("TaskState.objects.filter(pk=1).update(consecutive_failures=F('x') + 1)")
    assert orm_writes("Run.objects.filter(\n    pk=1,\n).update(due_at=now)")
    assert orm_writes("task.runs.filter(status='pending').delete()")
    assert not orm_writes("Run.objects.filter(pk=1).values_list('id')")
    assert not orm_writes("PeriodicTask.objects.filter(id=1).update(enabled=False)")
