"""The shape the code keeps: one SQL dialect, and imports that point one way.

Read from the source files (no database): every ``import`` in ``tasks_app`` — including those
inside functions, excluding ``if TYPE_CHECKING:`` blocks, which never run — is an edge of the
module graph, and that graph has no cycle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tasks_app"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts}


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:``."""
    found: list[ast.AST] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def imports_of(name: str) -> set[str]:
    """The tasks_app modules that module ``name`` imports when it runs."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            source = node.module or ""
            if node.level:
                source = f"{base}.{source}" if source else base
            for alias in node.names:
                child = f"{source}.{alias.name}"
                targets.add(child if child in MODULES else source)
    return {t for t in targets if t in MODULES and t != name}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_modules_of_tasks_app_import_each_other_without_a_cycle() -> None:
    graph = {name: imports_of(name) for name in MODULES}
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_entry_points_do_not_import_each_other() -> None:
    """The CLI, the admin and the Celery tasks use services and selectors, not the API."""
    for name in MODULES:
        if name.startswith("tasks_app.api"):
            continue
        assert not any(t.startswith("tasks_app.api") for t in imports_of(name)), name


def test_one_sql_dialect_postgres() -> None:
    """No second database engine and no branch on one in the product's code."""
    pattern = re.compile(r"sqlite|connection\.vendor", re.IGNORECASE)
    offenders = [
        str(path.relative_to(ROOT))
        for folder in ("tasks_app", "project")
        for path in (ROOT / folder).rglob("*.py")
        if pattern.search(path.read_text())
    ]
    assert offenders == []


def test_tasks_and_runs_are_written_only_by_services_and_the_store() -> None:
    """Only the service layer (and the store it calls) writes tasks and runs: an
    ``.update(`` or ``.create(`` on them anywhere else would be a second place that moves
    a status."""
    writes = re.compile(r"(Run|Task)\.objects[^\n]*\.(update|create|bulk_create|delete)\(")
    offenders = [
        name
        for name, path in MODULES.items()
        if not name.startswith(("tasks_app.services", "tasks_app.store"))
        and writes.search(path.read_text())
    ]
    assert offenders == []
