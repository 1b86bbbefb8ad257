"""``manage.py tasks ... --payload`` with JSON it cannot take: one line naming the payload,
a non-zero exit status, no traceback, and nothing written."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tasks_app import services
from tests.shared import cli
from tests.stored_rows import counts

pytestmark = pytest.mark.django_db

# name: (arguments after the verb and task, text in the one-line error)
CASES = {
    "execute NaN": (
        ("execute", "ok", "--payload", '{"x": NaN}'),
        "payload: at payload.x: numbers must be finite",
    ),
    "execute Infinity": (
        ("execute", "ok", "--payload", '{"x": -Infinity}'),
        "payload: at payload.x: numbers must be finite",
    ),
    "execute 1e400": (
        ("execute", "ok", "--payload", '{"x": [1e400]}'),
        "payload: at payload.x.0: numbers must be finite",
    ),
    "create NaN": (
        ("create", "edge", "--action", "noop", "--payload", '{"x": NaN}'),
        "payload: at payload.x: numbers must be finite",
    ),
    "update 1e400": (
        ("update", "ok", "--payload", '{"x": 1e400}'),
        "payload: at payload.x: numbers must be finite",
    ),
    "execute 100,000 levels": (
        ("execute", "ok", "--payload", "[" * 100_000 + "]" * 100_000),
        "--payload: nests deeper than 32 levels",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_payload_it_cannot_take_is_one_line_and_writes_nothing(case: str) -> None:
    args, text = CASES[case]
    services.task_create(id="ok", action="noop")
    before = counts()
    with pytest.raises(CommandError) as info:
        call_command("tasks", *args, stdout=StringIO(), stderr=StringIO())
    message = str(info.value)
    assert text in message and "\n" not in message, message
    assert counts() == before


@pytest.mark.django_db(transaction=True)
def test_the_real_command_line_prints_one_line_and_no_traceback() -> None:
    services.task_create(id="ok", action="noop")
    done = cli("execute", "ok", "--payload", '{"x": NaN}')
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "payload: at payload.x: numbers must be finite" in lines[0], lines
