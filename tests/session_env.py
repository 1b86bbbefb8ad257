"""Loaded with ``-p`` before Django reads its settings: one broker queue per test session,
so parallel sessions and leftover messages never mix."""

import os
import uuid

os.environ.setdefault("TASKS_DEFAULT_QUEUE", f"test-{uuid.uuid4().hex[:10]}")
# The session's queues a task may name: its own, the action tests' worker's
# (tests/actions/conftest.py) and the quorum-queue test's (tests/e2e/test_quorum_queues.py).
_queue = os.environ["TASKS_DEFAULT_QUEUE"]
os.environ.setdefault("TASKS_QUEUES", f"{_queue},{_queue}-actions,{_queue}-quorum")
os.environ.setdefault(
    "TASKS_EXTRA_APPS", "tests.effects"
)  # test actions + effect rows (tests/effects)
