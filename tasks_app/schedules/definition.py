"""The ``Schedule`` type: one task as code declares it (see the package's docstring)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..runtime.task_framework import function_task_fields, function_task_id


@dataclass(frozen=True, init=False)
class Schedule:
    """One task, as code declares it: its id and its fields (keywords of the REST API)."""

    id: str
    fields: dict[str, Any] = field(default_factory=dict)

    def __init__(self, id: str, /, **fields: Any) -> None:
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "fields", dict(fields))


def function_policy(function: Any, /, **fields: Any) -> Schedule:
    """The task of the ``@task`` ``function`` (or its dotted path), the one its enqueues
    run under, with these policies (``max_retries``, ``retry_backoff_seconds``,
    ``timeout_seconds``, ``expires_after_seconds``, ``overlap_policy``, ``queue``,
    ``priority``, ``pause_after_failures``, ``unique_on``, ``unique_for_seconds``,
    ``debounce``, ...). Its name and description are those its
    enqueues give it, unless given here: taking its task over changes only what is declared.
    Declared, it is read-only elsewhere; chosen in code, the function needs no
    ``TASKS_DJANGO_TASKS`` entry."""
    path = function if isinstance(function, str) else function.module_path
    named = function_task_fields(path)
    fixed = sorted({"action", "payload"} & fields.keys())
    if fixed:
        raise TypeError(f"function_policy() sets the function's {' and '.join(fixed)} itself")
    return Schedule(function_task_id(path), **{**named, **fields})
