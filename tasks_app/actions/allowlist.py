"""Allow-lists of dotted names as shell-style patterns (``myapp.tasks.*``,
``billing.tasks.send_invoice``): the one matching rule of the settings that say what an
action may call (``TASKS_CELERY_TASKS`` for ``celery``, ``TASKS_DJANGO_TASKS`` for
``django_task``). Pure: a name and patterns in, an answer out; nothing is imported.

``*`` matches dots too, so ``myapp.*`` admits every module below ``myapp``; matching is
case-sensitive, as Python's names are.
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase


def matches(name: str, patterns: Iterable[str]) -> bool:
    """Whether ``name`` matches one of ``patterns``."""
    return any(fnmatchcase(name, pattern) for pattern in patterns)


def unmatched(name: str, patterns: Iterable[str], *, setting: str) -> str:
    """How a name that matches none of ``setting``'s patterns is refused (one wording)."""
    shown = ", ".join(patterns) or "none"
    return f"{name!r} matches none of the allowed patterns: {shown} (setting {setting})"
