"""Django's task framework as the backend's users meet it: every name of
``tasks_app.runtime.task_framework`` (the framework under one set of names on Django 6.0 and
5.2, and the checks that need no database, one layer down where the services use them), and
the exception class a run that ended without an exception of the function names
(:class:`RunEnded`, whose path ``tasks_app.django_tasks.framework.RunEnded`` a ``TaskError``
shows)."""

from __future__ import annotations

import re

from ..runtime.task_framework import (
    ACTION,
    DEFAULT_TASK_PRIORITY,
    DEFAULT_TASK_QUEUE_NAME,
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    call_problem,
    function_task_id,
    resolve,
    run_priority,
    stored_json,
    task_enqueued,
    task_finished,
    task_started,
)

__all__ = [
    "ACTION",
    "BaseTaskBackend",
    "DEFAULT_TASK_PRIORITY",
    "DEFAULT_TASK_QUEUE_NAME",
    "InvalidTask",
    "RunEnded",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "call_problem",
    "exception_class_path",
    "function_task_id",
    "resolve",
    "run_priority",
    "stored_json",
    "task_enqueued",
    "task_finished",
    "task_started",
]


class RunEnded(Exception):
    """A run that ended without an exception of the function: expired before it could
    start, cancelled, skipped, lost with its worker or stopped at its time limit. The
    ``TaskError`` of such an attempt names this class; its traceback holds the run's error."""


def exception_class_path(error: str) -> str:
    """The dotted path of the exception class in a run's error (``"Name: message"``, a
    blank line, the traceback), which the traceback's final line spells out in full
    (``module.Name: message``; builtins by name alone); :class:`RunEnded` for an error
    without a traceback."""
    head, _, trace = error.partition("\n\n")
    name = head.split(":", 1)[0].strip()
    if not trace.startswith("Traceback") or not re.fullmatch(r"\w+", name):
        return f"{RunEnded.__module__}.{RunEnded.__qualname__}"
    pattern = re.compile(rf"^((?:\w+\.)*){re.escape(name)}(?::|$)")
    for line in reversed(trace.splitlines()):
        match = pattern.match(line)
        if match:
            return match.group(0).rstrip(":") if match.group(1) else f"builtins.{name}"
    return f"builtins.{name}"
