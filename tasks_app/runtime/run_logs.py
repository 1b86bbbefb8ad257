"""The run log: every line about a run carries its fields (``run_id``, ``task_id``,
``attempt``, ``lateness_ms``, ``status``, ``trigger``). Code that has the run logs through
:func:`run_log`, ``run_log(log, run).info("run completed")``. The formatting of those lines
(JSON or plain) and the fields of a line logged inside a worker's ``execute_run`` are
``tasks_app.observability.logs``'s, which names these under their public path."""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any

RUN_FIELDS = ("run_id", "task_id", "attempt", "lateness_ms", "status", "trigger")


class RunLogAdapter(logging.LoggerAdapter):  # type: ignore[type-arg]
    """Merges the run's fields into every call's ``extra`` (call-site values win)."""

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **kwargs.get("extra", {})}
        return msg, kwargs


def run_fields(run: Any) -> dict[str, Any]:
    """The fields every line about ``run`` carries (works on a ``Run`` or anything alike)."""
    return {
        "run_id": str(run.id),
        "task_id": getattr(run, "task_id", None),
        "attempt": getattr(run, "attempt", None),
        "lateness_ms": getattr(run, "lateness_ms", None),
        "status": getattr(run, "status", None),
        "trigger": getattr(run, "trigger", None),
    }


def run_log(logger: logging.Logger, run: Any) -> RunLogAdapter:
    """``run_log(log, run).info("run completed")`` → a line carrying the run's fields."""
    return RunLogAdapter(logger, run_fields(run))
