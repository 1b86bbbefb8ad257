"""The shape the code keeps: one SQL dialect, imports that point one way (down a table of
layers), and statuses that the ORM cannot write.

Read from the source files (no database): every ``import`` in ``tasks_app`` — including those
inside functions, excluding ``if TYPE_CHECKING:`` blocks, which never run — is an edge of the
module graph, and that graph has no cycle.
"""

from __future__ import annotations

import ast
import re
import uuid
from pathlib import Path

import pytest

from tasks_app.models import Run, RunStatus, StatusWriteRefused, TaskState, TaskStatus

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


# The layers, lowest first: a module may import modules of its own layer or of lower ones
# (entry points -> services and selectors -> store and models -> pure modules). A module is
# in the layer of the longest prefix that names it; every module of tasks_app is in one.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "pure",
        (
            "tasks_app.vocabulary.choices",
            "tasks_app.vocabulary.display",
            "tasks_app.conf",
            "tasks_app.timing",
            "tasks_app.vocabulary.validation",
            "tasks_app.actions",
            "tasks_app.runtime.hardening",
            "tasks_app.runtime.client_address",
            "tasks_app.runtime.cache_keys",
            "tasks_app.runtime.clock",
            "tasks_app.messaging.queues",
            "tasks_app.schedules.definition",
            "tasks_app.vocabulary.secret_fields",
            "tasks_app.django_tasks.framework",
            "tasks_app.broker",
        ),
    ),
    ("models", ("tasks_app.models",)),
    ("store", ("tasks_app.store", "tasks_app.messaging.dispatch")),
    (
        "services",
        (
            "tasks_app.services",
            "tasks_app.schedules",
            "tasks_app.selectors",
            "tasks_app.services.permissions",
            "tasks_app.services.tokens",
            "tasks_app.checks",
            "tasks_app.celery_defaults",
            "tasks_app.observability.health",
            "tasks_app.observability.logs",
            "tasks_app.django_tasks.results",
        ),
    ),
    (
        "entry points",
        (
            "tasks_app.admin",
            "tasks_app.api",
            "tasks_app.management",
            "tasks_app.worker.celery_tasks",
            "tasks_app.beat",
            "tasks_app.worker",
            "tasks_app.observability",
            "tasks_app.selectors.representations",
            "tasks_app.templatetags",
            "tasks_app.apps",
            "tasks_app.urls",
            "tasks_app.django_tasks",
        ),
    ),
]


def layer_of(name: str) -> int | None:
    """The index in LAYERS of module ``name`` (the longest matching prefix), or None."""
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and (
                best is None or len(prefix) > best[0]
            ):
                best = (len(prefix), index)
    return None if best is None else best[1]


def test_every_module_is_in_a_layer() -> None:
    unplaced = [name for name in MODULES if name != "tasks_app" and layer_of(name) is None]
    assert unplaced == [], "add these modules to LAYERS"


def test_imports_point_down_the_layer_table() -> None:
    upward = [
        f"{name} ({LAYERS[low][0]}) imports {target} ({LAYERS[high][0]})"
        for name in MODULES
        if (low := layer_of(name)) is not None
        for target in sorted(imports_of(name))
        if (high := layer_of(target)) is not None and high > low
    ]
    assert upward == []


def test_the_layer_check_finds_an_upward_import() -> None:
    assert layer_of("tasks_app.models") == 1
    assert layer_of("tasks_app.observability.metrics") == 4  # not services' health/logs
    assert layer_of("tasks_app.observability.health") == 3
    assert layer_of("elsewhere") is None


def test_an_orm_write_of_a_status_outside_the_store_raises() -> None:
    """Statuses change only through the store's named statements: the models refuse an ORM
    write of one at run time (before any SQL is sent, so no database is needed here)."""
    with pytest.raises(StatusWriteRefused, match="Run.status"):
        Run.objects.filter(pk=uuid.uuid4()).update(status=RunStatus.FAILED)
    with pytest.raises(StatusWriteRefused, match="TaskState.status"):
        TaskState.objects.filter(pk="nightly").update(status=TaskStatus.PAUSED)
    with pytest.raises(StatusWriteRefused):
        Run.objects.bulk_update([], ["status", "error"])
    run = Run.from_db("default", ["id", "status"], [uuid.uuid4(), RunStatus.RUNNING])
    run.status = RunStatus.COMPLETED
    with pytest.raises(StatusWriteRefused, match="Model.save"):
        run.save(update_fields=["status"])


def test_tasks_app_never_lifts_the_status_guard() -> None:
    """``allow_status_writes`` is for fixtures (tests, benchmarks); no module of the app uses
    it (models.py defines it; the store re-exports it for fixtures)."""
    users = [
        name
        for name, path in MODULES.items()
        if name not in ("tasks_app.models", "tasks_app.store")
        and "allow_status_writes" in path.read_text()
    ]
    assert users == []


def test_no_test_module_imports_another_test_module() -> None:
    """Helpers shared by test modules live in shared helper modules (``tests/shared.py``,
    ``tests/processes.py``, ...): importing one test module from another runs its tests'
    module-level code twice and hides where a helper lives."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                if re.search(r"(^|\.)test_\w+$", node.module):
                    offenders.append(f"{path.relative_to(ROOT)}: {node.module}")
    assert offenders == []
