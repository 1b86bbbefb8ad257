"""Django's task framework under one set of names on Django 6.0 (``django.tasks``) and 5.2
(the ``django-tasks`` backport), and the checks that need no database: what survives JSON,
whether a call fits the function, how priorities, queues and exception classes map."""

from __future__ import annotations

import functools
import hashlib
import inspect
import math
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import django
from django.utils.module_loading import import_string

from ..vocabulary.validation import (
    DEFAULT_PRIORITY,
    NUMERIC_BOUNDS,
    TASK_ID_MAX_LENGTH,
    TASK_ID_PATTERN,
)

if django.VERSION >= (6, 0) or TYPE_CHECKING:
    from django.tasks import (  # type: ignore[import-not-found,unused-ignore]
        DEFAULT_TASK_QUEUE_NAME,
        Task,
        TaskContext,
        TaskResult,
        TaskResultStatus,
    )
    from django.tasks.backends.base import (  # type: ignore[import-not-found,unused-ignore]
        BaseTaskBackend,
    )
    from django.tasks.base import (  # type: ignore[import-not-found,unused-ignore]
        DEFAULT_TASK_PRIORITY,
        TaskError,
    )
    from django.tasks.exceptions import (  # type: ignore[import-not-found,unused-ignore]
        InvalidTask,
        TaskResultDoesNotExist,
    )
    from django.tasks.signals import (  # type: ignore[import-not-found,unused-ignore]
        task_enqueued,
        task_finished,
        task_started,
    )
else:  # the django-tasks backport: the same API under another name
    from django_tasks import (
        DEFAULT_TASK_QUEUE_NAME,
        TaskContext,
        TaskResult,
        TaskResultStatus,
    )
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import DEFAULT_TASK_PRIORITY, Task, TaskError
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started

__all__ = [
    "ACTION",
    "DEFAULT_TASK_PRIORITY",
    "DEFAULT_TASK_QUEUE_NAME",
    "BaseTaskBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "call_problem",
    "function_task_id",
    "resolve",
    "run_priority",
    "stored_json",
    "task_enqueued",
    "task_finished",
    "task_started",
]


# The action that calls a @task function inside a run (tasks_app/django_tasks/action.py).
ACTION = "django_task"
_TASK_ID = re.compile(TASK_ID_PATTERN)


def function_task_fields(path: str) -> dict[str, Any]:
    """The fields of the task of the ``@task`` function at ``path`` however it is made (its
    first enqueue, or ``function_policy`` in code): its name, description, action and
    payload (the function, no arguments: each run brings its own). A declaration's own
    keywords come on top; one that names no description keeps this one."""
    return {
        "name": path[:200],
        "description": "Runs of the @task function, one per call enqueued from code.",
        "action": ACTION,
        "payload": {"task": path},
    }


def function_task_id(path: str) -> str:
    """The id of the task of the ``@task`` function at ``path`` (its enqueues are its
    runs): the path itself when it makes a task id, else its first characters and a digest
    of the whole."""
    if len(path) <= TASK_ID_MAX_LENGTH and _TASK_ID.fullmatch(path):
        return path
    digest = hashlib.sha256(path.encode()).hexdigest()[:12]
    head = path.lstrip("_.-")[: TASK_ID_MAX_LENGTH - len(digest) - 1] or "task"
    return f"{head}-{digest}"


def run_priority(priority: int) -> int:
    """Django's priority (-100..100, default 0, larger first) as ours (0..9, default 5,
    larger first: ``validation``'s bound and default), never out of order: a larger
    priority never maps below a smaller one, and any priority above the default runs before
    it, any below after it (1..25 is 6, 26..50 is 7, 51..75 is 8, 76..100 is 9; -1..-20 is
    4 down to -81..-100 at 0). Ten broker levels cannot keep 201 apart: within a level, the
    broker's order is arrival."""
    bounds = NUMERIC_BOUNDS["priority"]
    if priority > 0:
        above = bounds.high - DEFAULT_PRIORITY
        return DEFAULT_PRIORITY + 1 + (min(priority, 100) - 1) * above // 100
    if priority < 0:
        below = DEFAULT_PRIORITY - bounds.low
        return DEFAULT_PRIORITY - 1 - (min(-priority, 100) - 1) * below // 100
    return DEFAULT_PRIORITY


def stored_json(value: Any, where: str) -> Any:
    """``value`` as a call's arguments are stored (tuples as lists, as Django does), when it
    comes back the same from JSON: only str, int, float (finite), bool, None, lists, tuples
    and dicts with string keys do; otherwise ``TypeError`` naming where it does not."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        raise TypeError(f"{where}: {value} is not a JSON number")
    if isinstance(value, list | tuple):
        return [stored_json(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, Mapping):
        stored = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where}: key {key!r} is not a string (JSON keys are strings)")
            stored[key] = stored_json(item, f"{where}[{key!r}]")
        return stored
    raise TypeError(f"{where}: a value of type {type(value).__name__} is not JSON")


def call_problem(task: Any, args: Iterable[Any], kwargs: Mapping[str, Any]) -> str | None:
    """Why the function of ``task`` cannot be called with these arguments (``None`` if it
    can), so a wrong call is refused when it is enqueued or saved, not when it runs."""
    signature = _signature(task.func)
    if signature is None:  # no signature to check against
        return None
    lead = [None] if task.takes_context else []
    try:
        signature.bind(*lead, *args, **kwargs)
    except TypeError as exc:
        return f"{task.module_path}(): {exc}"
    return None


@functools.lru_cache(maxsize=1024)
def _signature(func: Any) -> inspect.Signature | None:
    """The signature of ``func``, worked out once per function (every enqueue checks it)."""
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):
        return None


def resolve(path: str) -> Any:
    """The ``@task`` object at the dotted ``path``; ``ValueError`` saying why not."""
    try:
        found = import_string(path)
    except ImportError as exc:
        raise ValueError(f"cannot import {path!r}: {exc}") from exc
    if not isinstance(found, Task):
        raise ValueError(f"{path!r} is not a function decorated with @task (Django's tasks)")
    return found
