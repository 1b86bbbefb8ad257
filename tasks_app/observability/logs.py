"""Structured logs: ``LOG_FORMAT=json`` prints one JSON object per line.

Every line about a run carries ``run_id``, ``task_id``, ``attempt`` and ``lateness_ms``:

- code that has the run logs through :func:`run_log` (a ``LoggerAdapter`` that puts those
  fields in ``extra``): ``run_log(log, run).info("run completed")``;
- a line logged while a worker executes ``tasks_app.execute_run`` (Celery's own
  "received"/"succeeded" lines, an action's own logging) gets ``run_id`` from the Celery
  request, whose id is the run id, through :class:`RunContextFilter`.

Example line::

    {"ts": "2025-01-01T09:00:00.012Z", "level": "INFO", "logger": "tasks_app.worker.run_execution",
     "message": "run completed", "run_id": "…", "task_id": "nightly-report", "attempt": 1,
     "lateness_ms": 4.2, "process": 1234}
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from ..runtime.run_logs import RUN_FIELDS, RunLogAdapter, run_fields, run_log
from ..vocabulary.choices import EXECUTE_RUN

# run_log and its fields live one layer down (tasks_app.runtime.run_logs), where the services
# that log about a run import them; this module keeps them under their public name.
__all__ = [
    "RUN_FIELDS",
    "JsonFormatter",
    "RunContextFilter",
    "RunLogAdapter",
    "logging_config",
    "quiet_console",
    "run_fields",
    "run_log",
]

# LogRecord's own attributes: everything else on a record came from ``extra``.
_RESERVED = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line; fields from ``extra`` are kept as top-level keys."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        for key, value in record.__dict__.items():
            if key not in _RESERVED and not key.startswith("_") and key not in data:
                data[key] = value
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            data["stack"] = self.formatStack(record.stack_info)
        return json.dumps(data, default=str, ensure_ascii=False)


class RunContextFilter(logging.Filter):
    """Adds ``run_id`` to lines logged inside a worker's ``execute_run`` (the Celery task id
    is the run id). Attach it to the handler so third-party loggers get it too."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "run_id", None):
            return True
        try:
            from celery._state import get_current_task

            task = get_current_task()
        except Exception:  # no Celery, or outside a worker
            return True
        request = getattr(task, "request", None) if task is not None else None
        if task is not None and task.name == EXECUTE_RUN and request is not None and request.id:
            record.run_id = request.id
        return True


def logging_config(*, level: str = "INFO", format: str = "plain") -> dict[str, Any]:
    """A ``LOGGING`` setting for a project's processes: every logger's lines on stderr with
    their time, level and logger (``format="json"``: one JSON object per line, with the run's
    fields), each line logged while a run executes carrying its ``run_id``. Without one,
    Python prints the app's warnings bare (no level, no time) and drops its INFO lines: who
    changed or ran what, each run's outcome. Celery's worker and beat keep their own console
    format (they configure the root logger themselves)."""
    if format not in ("plain", "json"):
        raise ValueError(f"log format must be 'plain' or 'json', not {format!r}")
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"run_context": {"()": f"{__name__}.RunContextFilter"}},
        "formatters": {
            "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
            "json": {"()": f"{__name__}.JsonFormatter"},
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": format,
                "filters": ["run_context"],
            }
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {"django.db.backends": {"level": "WARNING"}},
    }


def quiet_console(verbosity: int) -> None:
    """A command-line call prints its result only: below ``-v 2`` the root logger's handlers
    (the console of ``LOGGING``) pass warnings and errors, not the INFO lines a service logs
    for the processes' logs (``task ... created by cli:root``). The audit trail records the
    call either way; ``-v 2`` shows the lines."""
    if verbosity >= 2:
        return
    for handler in logging.getLogger().handlers:
        handler.setLevel(max(handler.level, logging.WARNING))
