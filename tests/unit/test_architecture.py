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


# The layers, lowest first, as docs/architecture.md's table under "Who may import whom" says
# (the page is the one statement of them; this test reads it): a module may import modules of
# its own layer or of lower ones. A module is in the layer of the longest prefix that names it;
# every module of tasks_app is in one.
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def page_table(heading: str) -> list[list[str]]:
    """The rows (cells stripped; header and rule left out) of the first table under the
    ``## heading`` of docs/architecture.md."""
    text = ARCHITECTURE.read_text()
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip().strip("|").split("|")] for row in rows[2:]]


def quoted(cell: str) -> list[str]:
    """The names written as code (between backticks) in a cell."""
    return re.findall(r"`([^`]+)`", cell)


LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (row[0], tuple(quoted(row[1]))) for row in page_table("Who may import whom")
]
LAYER_NAMES = [name for name, _ in LAYERS]


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


def test_the_layer_table_is_read_from_the_page() -> None:
    assert LAYER_NAMES[:4] == ["pure", "models", "store", "services"]
    assert "entry points" in LAYER_NAMES and all(prefixes for _, prefixes in LAYERS)
    named = [prefix for _, prefixes in LAYERS for prefix in prefixes]
    assert len(named) == len(set(named)), "a prefix is in two layers"
    missing = [p for p in named if not any(m == p or m.startswith(p + ".") for m in MODULES)]
    assert missing == [], "the page names modules that do not exist"


def test_the_layer_check_finds_an_upward_import() -> None:
    services = LAYER_NAMES.index("services")
    assert layer_of("tasks_app.models") == LAYER_NAMES.index("models")
    assert layer_of("tasks_app.observability.metrics") == LAYER_NAMES.index("entry points")
    assert layer_of("tasks_app.observability.health") == services  # the longest prefix
    assert layer_of("elsewhere") is None


def room(name: str) -> str:
    """The room of module ``name``: its folder under tasks_app (or its own name, at the root)."""
    return name.split(".")[1] if name.count(".") else name


def test_entry_points_import_no_other_entry_point() -> None:
    """A module of the entry-point layer (the admin, the API, the CLI, the worker, beat, the
    Django tasks backend, /metrics) imports entry-point modules of its own room only: the CLI
    and the admin use selectors, not the API's filters; beat records its tick through health,
    not /metrics. Only the wiring above them (apps, urls, template tags) joins them."""
    entry = LAYER_NAMES.index("entry points")
    crossing = [
        f"{name} imports {target}"
        for name in MODULES
        if layer_of(name) == entry
        for target in sorted(imports_of(name))
        if layer_of(target) == entry and room(target) != room(name)
    ]
    assert crossing == []


def test_the_store_is_called_by_services_selectors_and_the_processes_own_code() -> None:
    """Every way in writes through services and reads through selectors; the worker and beat
    call the store themselves only for what no other way in does (a run's claim and finish,
    the lease, the sweep, leadership); three modules read or lock the database for
    themselves, as the page names them."""
    callers = {
        name for name in MODULES if room(name) != "store" and "tasks_app.store" in imports_of(name)
    }
    assert {"services", "selectors"} <= {room(name) for name in callers}
    others = sorted(
        n for n in callers if room(n) not in ("services", "selectors", "worker", "beat")
    )
    assert others == [
        "tasks_app.observability.health",
        "tasks_app.runtime.clock",
        "tasks_app.schedules.sync",
    ]


def test_an_operation_a_user_performs_is_named_entity_action() -> None:
    """A public service function that asks ``permissions.authorize`` (an operation a user can
    perform) is named ``<entity>_<action>``, its entity one of the models'."""
    entities = ("task", "tasks", "run", "runs", "queue", "token")
    operations = []
    for name, path in MODULES.items():
        if room(name) != "services" or name == "tasks_app.services.permissions":
            continue
        for node in ast.parse(path.read_text()).body:
            if (
                isinstance(node, ast.FunctionDef)
                and not node.name.startswith("_")  # a module's own helper, not an operation
                and "authorize(" in ast.unparse(node)
            ):
                operations.append(node.name)
    assert len(operations) >= 10
    assert [op for op in operations if not op.startswith(tuple(e + "_" for e in entities))] == []


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


# The walk of one run, as docs/architecture.md's table under "The walk of one run" declares it:
# each step a function, reached from the step before by a call (found in that function's
# body, through its module's imports) or by the run's message (the task name the publisher
# imports is the name the worker's task is registered under).
WALK = [
    (row[0], quoted(row[1])[0], row[2], row[3] == "yes")
    for row in page_table("The walk of one run")
]


def _source(module: str) -> str:
    """Module ``module``'s own package (where its relative imports start)."""
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def bindings(module: str) -> dict[str, str]:
    """The names ``module`` binds by ``from X import y`` (anywhere in it), each to ``X.y``."""
    bound: dict[str, str] = {}
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.ImportFrom):
            base = _source(module)
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            source = node.module or ""
            if node.level:
                source = f"{base}.{source}" if source else base
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{source}.{alias.name}"
    return bound


def defined_at(dotted: str) -> str:
    """Where the name ``dotted`` (``module.name``) is defined, through re-exports (a package
    whose ``__init__`` imports it from a module of its own)."""
    if dotted in MODULES:
        return dotted
    module, _, name = dotted.rpartition(".")
    if module not in MODULES:
        return dotted
    tree = ast.parse(MODULES[module].read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name == name:
            return dotted
    origin = bindings(module).get(name)
    return dotted if origin is None or origin == dotted else defined_at(origin)


def function_node(module: str, qualname: str) -> ast.FunctionDef:
    scope: list[ast.stmt] = ast.parse(MODULES[module].read_text()).body
    found: ast.AST | None = None
    for part in qualname.split("."):
        found = next(
            n for n in scope if isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name == part
        )
        scope = found.body
    assert isinstance(found, ast.FunctionDef), qualname
    return found


def callees(module: str, function: ast.FunctionDef) -> set[str]:
    """Where what ``function`` calls is defined: ``f(...)``, ``m.f(...)`` for a module ``m``."""
    bound = bindings(module)
    defined = {n.name for n in ast.parse(MODULES[module].read_text()).body if hasattr(n, "name")}
    found = set()
    for node in ast.walk(function):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name):
            if func.id in bound:
                found.add(defined_at(bound[func.id]))
            elif func.id in defined:
                found.add(f"{module}.{func.id}")
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if func.value.id in bound:
                found.add(defined_at(f"{bound[func.value.id]}.{func.attr}"))
    return found


def writes_through_the_store(module: str, function: ast.FunctionDef) -> bool:
    """Whether ``function``, or a function of its own module it calls (at any depth), uses a
    name bound to ``tasks_app.store``."""
    bound = bindings(module)
    seen: set[str] = set()
    todo = [function]
    while todo:
        node = todo.pop()
        if node.name in seen:
            continue
        seen.add(node.name)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and bound.get(sub.id, "").startswith("tasks_app.store"):
                return True
        for callee in callees(module, node):
            owner, _, name = callee.rpartition(".")
            if owner == module and name not in seen:
                try:
                    todo.append(function_node(module, name))
                except (StopIteration, AssertionError):
                    pass
    return False


def test_the_walk_of_one_run_is_what_the_code_calls() -> None:
    assert len(WALK) >= 5 and WALK[0][2] == "start"
    for (_, before, _, _), (step, code, reached_by, writes) in zip(WALK, WALK[1:]):
        module, _, qualname = code.partition(":")
        previous, _, previous_name = before.partition(":")
        here = function_node(module, qualname)
        if reached_by == "call":
            assert f"{module}.{qualname}" in callees(
                previous, function_node(previous, previous_name)
            ), f"{before} does not call {code} ({step})"
            assert (layer_of(module) or 0) <= (layer_of(previous) or 0), f"{code} is called up"
        else:
            assert reached_by == "message", step
            published = bindings(previous).get("EXECUTE_RUN")
            [registered] = [
                kw.value
                for d in here.decorator_list
                if isinstance(d, ast.Call)
                for kw in d.keywords
                if kw.arg == "name"
            ]
            assert isinstance(registered, ast.Name)
            assert published and bindings(module).get(registered.id) == published, step
        assert writes == writes_through_the_store(module, here), f"{code}: store ({step})"


def test_the_walk_of_one_run_enters_each_room_once() -> None:
    """The rooms the walk passes through, in order: once it leaves a room (by a call or its
    message), it never comes back to it."""
    rooms = [room(code.partition(":")[0]) for _, code, _, _ in WALK]
    entered = [r for i, r in enumerate(rooms) if i == 0 or rooms[i - 1] != r]
    assert len(entered) == len(set(entered)), " -> ".join(entered)
    assert any(writes for *_, writes in WALK), "the walk writes the run somewhere"


def test_the_walk_checks_find_a_missing_call() -> None:
    backend = "tasks_app.django_tasks.backend"
    enqueue = function_node(backend, "CeleryRunBackend.enqueue")
    assert "tasks_app.services.django_task.django_task_enqueue" in callees(backend, enqueue)
    assert "tasks_app.messaging.dispatch.send" not in callees(backend, enqueue)
    assert not writes_through_the_store(backend, enqueue)
