"""Loaded with ``-p`` before Django reads its settings: one broker queue per test session,
so parallel sessions and leftover messages never mix."""

import os
import uuid

os.environ.setdefault("TASKS_DEFAULT_QUEUE", f"test-{uuid.uuid4().hex[:10]}")
os.environ.setdefault(
    "TASKS_EXTRA_APPS", "tests.effects"
)  # test actions + effect rows (tests/effects)
