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
# The @task functions people may choose for the django_task action, in this process and in
# the workers the tests start: the demo's example and the tests' own functions.
os.environ.setdefault(
    "TASKS_DJANGO_TASKS", "project.example_tasks.*,tests.django_tasks.functions.*"
)
