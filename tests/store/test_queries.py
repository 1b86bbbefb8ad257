"""The named statements: each one parsed, issued by the services, and nowhere else spelled."""

import re
from pathlib import Path

from tasks_app import store

ROOT = Path(__file__).resolve().parents[2] / "tasks_app"


def test_every_named_statement_is_issued_by_a_service_or_read_by_a_selector() -> None:
    queries = store.queries()
    names = set(queries)
    assert {"create_run", "claim_run", "complete_run", "finish_run", "expire_runs"} <= names
    issued: set[str] = set()
    for path in ROOT.rglob("*.py"):
        text = path.read_text()
        found = set(re.findall(r'store\.(?:fetch_one|fetch_all|execute)\(\s*"(\w+)"', text))
        if found and "selectors" in path.parts:  # reads only
            writes = [n for n in found if not queries[n].lstrip().upper().startswith("SELECT")]
            assert not writes, f"{path} issues statements that are not reads: {writes}"
        elif found:
            assert "services" in path.parts, f"{path} issues store statements"
        if "services" in path.parts:  # a service may pick the statement's name first
            found |= names & set(re.findall(r'"(\w+)"', text))
        issued |= found
    assert issued == names, f"never issued: {names - issued}; unknown: {issued - names}"


def test_templates_expand_to_the_models_columns() -> None:
    create = store.queries()["create_run"]
    assert "{" not in create
    for field in store.RUN_FIELDS:
        assert f'"{field.column}"' in create and f"%({field.column})s" in create
    claim = store.queries()["claim_run"]
    assert 'r."id" AS "r_id"' in claim and 't."action" AS "t_action"' in claim


def test_parse_splits_named_blocks_and_drops_comments() -> None:
    text = "-- header\n\n-- name: one\n-- what it does\nSELECT 1;\n\n-- name: two\nSELECT 2\n"
    assert store.parse(text) == {"one": "SELECT 1", "two": "SELECT 2"}
