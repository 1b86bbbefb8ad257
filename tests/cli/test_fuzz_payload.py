"""Fuzzed ``manage.py tasks ... --payload`` (hypothesis): JSON that is not, numbers that are
not finite, nesting past any limit, NUL and lone surrogates. Every refusal is one line
naming the payload (``CommandError``: exit status 1, or 2 for text argparse cannot read),
never a traceback; a refused payload writes nothing."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tasks_app import services
from tasks_app.models import Task
from tests.fuzzing import payload_texts
from tests.stored_rows import counts

pytestmark = pytest.mark.django_db

EXAMPLES = 60


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    verb=st.sampled_from(["create", "update", "execute"]),
    payload=payload_texts,
)
def test_payload_options(db: None, verb: str, payload: str) -> None:
    if not Task.objects.filter(pk="fuzz").exists():
        services.task_create(id="fuzz", action="echo", payload={"message": "hi"})
    args = {
        "create": ("create", "fuzz-new", "--action", "echo"),
        "update": ("update", "fuzz"),
        "execute": ("execute", "fuzz"),
    }[verb]
    before = counts()
    try:
        call_command("tasks", *args, "--payload", payload, stdout=StringIO(), stderr=StringIO())
    except CommandError as exc:
        message = str(exc)
        assert "\n" not in message and "Traceback" not in message, message
        assert "payload" in message, message
        assert counts() == before
    else:
        if (made := Task.objects.filter(pk="fuzz-new").first()) is not None:
            services.task_delete(task=made)
