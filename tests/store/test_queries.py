"""The store's face: one typed function per statement, SQL only under ``tasks_app/store/``,
answers read by name, and every statement runnable as written."""

import ast
import inspect
import re
import typing
from pathlib import Path

import pytest
from django.db import connection

from tasks_app import store
from tasks_app.store import _engine

ROOT = Path(__file__).resolve().parents[2] / "tasks_app"
STORE = ROOT / "store"
# The Postgres transport of the embedded stack is kombu's (SQLAlchemy, its own tables and
# connection): a broker, not the app's store.
TRANSPORT = ROOT / "broker.py"
# A statement as text: its first keyword in capitals and what follows it.
SQL = re.compile(
    r"^\s*(SELECT \S|INSERT INTO \w|UPDATE \w+ SET|DELETE FROM \w|WITH (RECURSIVE )?\w+(\(\w+\))? AS"
    r"|CREATE (OR REPLACE |UNIQUE )?(TABLE|INDEX|FUNCTION)|ALTER TABLE|DROP \w)"
)


def _modules_outside_the_store() -> list[Path]:
    return [
        path
        for path in ROOT.rglob("*.py")
        if STORE not in path.parents and "migrations" not in path.parts and path != TRANSPORT
    ]


def _string_constants(tree: ast.AST) -> list[str]:
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_no_sql_text_cursor_or_statement_name_outside_the_store() -> None:
    names = set(store.queries())
    offences = []
    for path in _modules_outside_the_store():
        text = path.read_text()
        tree = ast.parse(text)
        for value in _string_constants(tree):
            if SQL.match(value):
                offences.append(f"{path.relative_to(ROOT)}: SQL text {value[:40]!r}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in {
                "cursor",
                "execute",
                "fetch_one",
                "fetch_all",
                "_engine",
            }:
                offences.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}")
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("_engine"):
                offences.append(f"{path.relative_to(ROOT)}: imports the store's engine")
        for name in re.findall(r"store\.\w+\(\s*\"(\w+)\"", text):
            if name in names:
                offences.append(f"{path.relative_to(ROOT)}: names statement {name}")
    assert not offences, "\n".join(offences)


def _functions_issuing(statement: str) -> list[str]:
    tree = ast.parse((STORE / "__init__.py").read_text())
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any(isinstance(c, ast.Constant) and c.value == statement for c in ast.walk(node))
    ]


@pytest.mark.parametrize("statement", sorted(store.queries()))
def test_every_statement_has_one_function_of_the_stores_face(statement: str) -> None:
    issuers = [name for name in _functions_issuing(statement) if not name.startswith("_")]
    # enqueue_run and enqueue_runs are the one- and many-run cases of one function, and
    # the leader's round trip is the health check's statement on beat's own connection.
    assert len(issuers) == 1 or set(issuers) == {"ping", "leader_ping"}, issuers


def _public_functions() -> list[typing.Any]:
    return [
        f
        for name, f in vars(store).items()
        if inspect.isfunction(f) and f.__module__ == store.__name__ and not name.startswith("_")
    ]


@pytest.mark.parametrize("function", _public_functions(), ids=lambda f: f.__name__)
def test_every_answer_is_read_by_name_not_by_position(function: typing.Any) -> None:
    """No function of the face answers a bare tuple (nor a list of them): a caller gets a
    model, a named tuple, a scalar or a collection of those, never a row to index."""
    answer = typing.get_type_hints(function).get("return")

    def bare_tuples(hint: typing.Any) -> bool:
        if typing.get_origin(hint) is tuple or hint is tuple:
            return True
        return any(bare_tuples(arg) for arg in typing.get_args(hint))

    assert not bare_tuples(answer), f"{function.__name__} answers {answer}"
    parameters = inspect.signature(function).parameters.values()
    positional = [p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert len(positional) <= 2, f"{function.__name__}: arguments named, not by position"


@pytest.mark.django_db
@pytest.mark.parametrize("statement", sorted(store.queries()))
def test_every_statement_runs_as_written(statement: str) -> None:
    """Postgres prepares the statement's text as it is in queries.sql (no text is filled in
    by the code), its %(name)s parameters numbered."""
    sql = store.queries()[statement]
    assert "{" not in sql
    order: list[str] = []
    for name in re.findall(r"%\((\w+)\)s", sql):
        if name not in order:
            order.append(name)
    numbered = re.sub(r"%\((\w+)\)s", lambda m: f"${order.index(m[1]) + 1}", sql)
    with connection.cursor() as cursor:
        cursor.execute(f"PREPARE scratch AS {numbered}")
        cursor.execute("DEALLOCATE scratch")


def test_parse_splits_named_blocks_and_drops_comments() -> None:
    text = "-- header\n\n-- name: one\n-- what it does\nSELECT 1;\n\n-- name: two\nSELECT 2\n"
    assert _engine.parse(text) == {"one": "SELECT 1", "two": "SELECT 2"}
