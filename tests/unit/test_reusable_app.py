"""``tasks_app`` stands on its own: it imports nothing from the project it ships with, and it
reads its ``TASKS_*`` settings in one module (tasks_app/conf.py), so a project that installs
it gets the declared defaults and checks. Read from the source files' syntax trees."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tasks_app"
SOURCES = sorted(PACKAGE.rglob("*.py"))


def _trees() -> list[tuple[str, ast.AST]]:
    return [(str(p.relative_to(ROOT)), ast.parse(p.read_text(), str(p))) for p in SOURCES]


def test_the_app_imports_nothing_from_the_project() -> None:
    found = []
    for path, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found += [f"{path}:{node.lineno} {n}" for n in names if n.split(".")[0] == "project"]
    assert found == []


def _reads_a_tasks_setting(node: ast.AST) -> bool:
    """``settings.TASKS_X`` or ``getattr(settings, "TASKS_X"...)`` on Django's settings."""
    if isinstance(node, ast.Attribute) and node.attr.startswith("TASKS_"):
        return isinstance(node.value, ast.Name) and "settings" in node.value.id
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id in {"getattr", "hasattr"} and len(node.args) >= 2:
            name = node.args[1]
            return isinstance(name, ast.Constant) and str(name.value).startswith("TASKS_")
    return False


def test_tasks_settings_are_read_in_one_module() -> None:
    readers = {
        f"{path}:{node.lineno}"
        for path, tree in _trees()
        for node in ast.walk(tree)
        if _reads_a_tasks_setting(node)
    }
    assert {where.split(":")[0] for where in readers} <= {"tasks_app/conf.py"}, sorted(readers)
