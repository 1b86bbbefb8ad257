"""Input edges and bounds through ``manage.py tasks``: each is a one-line error naming the
field and a non-zero exit status, and the database unchanged. docs/input-rules.md has the
table.

Most cases run the command in-process (``call_command`` raises the ``CommandError`` the real
command line turns into its exit status); the cases that live in the command line itself
(bytes that are not UTF-8, exit statuses) run the real ``manage.py``.
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tasks_app import services
from tasks_app.models import Run, Task
from tests.shared import cli
from tests.stored_rows import counts

pytestmark = pytest.mark.django_db


CREATE = ("create", "edge", "--action", "noop")

# name: (arguments, text in the one-line error: the field and the rule)
CASES: dict[str, tuple[tuple[str, ...], str]] = {
    "payload with a lone surrogate escape": (
        ("create", "edge", "--action", "echo", "--payload", '{"message": "\\ud800"}'),
        "payload: at payload.message: must not contain lone surrogates",
    ),
    "payload with a NUL escape": (
        ("create", "edge", "--action", "echo", "--payload", '{"message": "\\u0000"}'),
        "payload: at payload.message: must not contain NUL",
    ),
    "payload nested 40 levels": (
        (*CREATE, "--payload", '{"a": ' + "[" * 40 + "]" * 40 + "}"),
        "payload: nests deeper than 32 levels",
    ),
    "payload nested 10,000 levels": (
        (*CREATE, "--payload", "[" * 10_000 + "]" * 10_000),
        "nests deeper than 32 levels",
    ),
    "unique key over 200 characters": (
        ("execute", "ok", "--unique-key", "k" * 201),
        "unique_key: must be at most 200 characters",
    ),
    "negative unique window": (
        ("execute", "ok", "--unique-key", "k", "--unique-for=-5s"),
        "--unique-for",
    ),
    "unique window without a key": (
        ("schedule", "ok", "--in", "1m", "--unique-for", "5m"),
        "unique_for_seconds: needs a unique_key",
    ),
    "unique_on that names no field": (
        (*CREATE, "--unique-on", "two words"),
        "unique_on: must be blank, '*'",
    ),
    "payload in execute NaN": (
        ("execute", "ok", "--payload", '{"x": NaN}'),
        "payload: at payload.x: numbers must be finite",
    ),
    "payload in execute Infinity": (
        ("execute", "ok", "--payload", '{"x": -Infinity}'),
        "payload: at payload.x: numbers must be finite",
    ),
    "payload in execute 1e400": (
        ("execute", "ok", "--payload", '{"x": [1e400]}'),
        "payload: at payload.x.0: numbers must be finite",
    ),
    "payload NaN in create": (
        ("create", "edge", "--action", "noop", "--payload", '{"x": NaN}'),
        "payload: at payload.x: numbers must be finite",
    ),
    "payload 1e400 in update": (
        ("update", "ok", "--payload", '{"x": 1e400}'),
        "payload: at payload.x: numbers must be finite",
    ),
    "payload in execute 100,000 levels": (
        ("execute", "ok", "--payload", "[" * 100_000 + "]" * 100_000),
        "--payload: nests deeper than 32 levels",
    ),
    "cron with Arabic-Indic digits": (
        (*CREATE, "--cron", "\u0661 * * * *"),
        "cron: invalid cron expression: minute: '\u0661' is not a number (digits 0-9)",
    ),
    "queue with a slash": ((*CREATE, "--queue", "a/b"), "queue: No spaces, '/'"),
    "queue no worker consumes": (
        (*CREATE, "--queue", "nobody-listens"),
        "queue: 'nobody-listens' is not a configured queue",
    ),
    "priority 10**20": ((*CREATE, "--priority", str(10**20)), "priority: Ensure"),
    "max retries 101": ((*CREATE, "--max-retries", "101"), "max_retries: Ensure"),
    "timeout 400 days": ((*CREATE, "--timeout", "400d"), "timeout_seconds: Ensure"),
    "expiry 400 days": ((*CREATE, "--expires-after", "400d"), "expires_after_seconds: Ensure"),
    "interval 400 days": ((*CREATE, "--every", "400d"), "interval_seconds: Ensure"),
    "runs --limit 10**30": (("runs", "--limit", str(10**30)), "--limit: must be between"),
    "preview --count 0": (("preview", "ok", "--count", "0"), "--count: must be between"),
    "schedule --in 10**20 days": (
        ("schedule", "ok", "--in", f"{10**20}d"),
        "delay_seconds: must be at most",
    ),
    "schedule a cron with a non-ASCII digit": (
        ("schedule", "ok", "--cron", "0 \u0669 * * *"),
        "cron: invalid cron expression",
    ),
    "backfill up to year 9999": (
        ("backfill", "ok", "--start", "2026-01-01T00:00:00Z", "--end", "9999-12-31T23:59:59Z"),
        "end: must be between 1970-01-01",
    ),
    "pause note with a lone surrogate": (
        ("pause", "ok", "--note", "\udcff"),
        "note: must not contain lone surrogates",
    ),
    "rate limit with an unknown period": (
        (*CREATE, "--rate", "10/w"),
        "rate_limit: Use <starts>/<period>",
    ),
    "concurrency limit of 0": (
        (*CREATE, "--concurrency", "0"),
        "concurrency_limit: Ensure this value is greater than or equal to 1",
    ),
    "limit per key without a key": (
        (*CREATE, "--concurrency-per-key", "1"),
        "concurrency_limit_per_key: needs flow_key",
    ),
    "flow key with a space": (
        (*CREATE, "--flow-key", "customer id"),
        "flow_key: Use a payload field name",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_line_naming_the_field_and_writes_nothing(case: str) -> None:
    args, text = CASES[case]
    services.task_create(id="ok", action="noop", schedule_type="interval", interval_seconds=60)
    before = counts()
    with pytest.raises(CommandError) as info:
        call_command("tasks", *args, stdout=StringIO(), stderr=StringIO())
    message = str(info.value)
    assert text in message and "\n" not in message, message
    assert counts() == before


def test_preview_of_a_stored_row_it_cannot_compute_names_the_field() -> None:
    task = services.task_create(id="legacy", action="noop", schedule_type="cron", cron="0 9 * * *")
    Task.objects.filter(pk=task.pk).update(timezone="Mars/Olympus")
    with pytest.raises(CommandError, match="timezone: unknown time zone 'Mars/Olympus'"):
        call_command("tasks", "preview", "legacy", stdout=StringIO())


@pytest.mark.django_db(transaction=True)
def test_the_real_command_line_exits_non_zero_with_one_line() -> None:
    # A name that is not UTF-8 (Python reads it as a lone surrogate, '\udcff').
    not_utf8 = cli(
        "create",
        "edge",
        "--action",
        "noop",
        "--name",
        b"caf\xff".decode("utf-8", "surrogateescape"),
    )
    assert not_utf8.returncode == 1, not_utf8.stderr
    assert not_utf8.stderr.strip().count("\n") == 0
    assert "name: must not contain lone surrogates" in not_utf8.stderr

    arabic = cli("create", "edge", "--action", "noop", "--cron", "\u0661 * * * *")
    assert arabic.returncode == 1 and "cron: invalid cron expression" in arabic.stderr

    deep = cli("create", "edge", "--action", "noop", "--payload", "[" * 10_000 + "]" * 10_000)
    assert deep.returncode == 2  # a usage error, as any unreadable --payload
    assert "--payload: nests deeper than 32 levels" in deep.stderr.strip().splitlines()[-1]

    nan = cli("create", "edge", "--action", "noop", "--payload", '{"x": NaN}')
    assert nan.returncode == 1, nan.stderr  # readable, but not a value it can store
    lines = nan.stderr.strip().splitlines()
    assert len(lines) == 1 and "payload: at payload.x: numbers must be finite" in lines[0], lines

    limit = cli("runs", "--limit", str(10**30))
    assert limit.returncode == 2 and "--limit: must be between" in limit.stderr
    assert Task.objects.count() == 0 and Run.objects.count() == 0
