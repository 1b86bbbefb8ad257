"""The ``command`` action: an allow-listed Django management command, run in-process.

``call_command`` parses the arguments with the command's own parser, exactly as on the
command line, but no shell and no new interpreter are involved, and the process-level
options ``--settings`` / ``--pythonpath`` have no effect (they are applied only by
``manage.py``), so arguments cannot make the worker import other code. Only names in
``TASKS_COMMAND_ALLOWLIST`` run; the check happens when the task is saved *and* when it
runs (the list may have changed). Output (stdout and stderr) is kept up to the run output
limit; the run's ``truncated`` flag says when more was written.
"""

from __future__ import annotations

import io
import shlex

from django.core.management import call_command, get_commands
from django.core.management.base import CommandError

from ..conf import app_settings
from .base import JSON, ActionError, Outcome, PayloadError, RunContext, register

SCHEMA: dict[str, JSON] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,100}$"},
        "args": {
            "oneOf": [
                {"type": "string", "maxLength": 10_000},
                {
                    "type": "array",
                    "items": {"type": "string", "maxLength": 10_000},
                    "maxItems": 500,
                },
            ]
        },
    },
    "required": ["command"],
    "additionalProperties": False,
}


class CappedBuffer(io.StringIO):
    """A text stream that keeps the first ``limit`` bytes (+1, so the cap is detectable)."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit
        self.kept = 0
        self.written = 0

    def write(self, text: str) -> int:
        size = len(text.encode("utf-8", errors="replace"))
        self.written += size
        if self.kept <= self.limit:
            room = self.limit + 1 - self.kept
            piece = text if size <= room else text[:room]
            super().write(piece)
            self.kept += len(piece.encode("utf-8", errors="replace"))
        return len(text)


def arguments(payload: dict[str, JSON]) -> list[str]:
    """The argument list: given as a list, or a string split like a POSIX shell would
    (quotes respected, nothing expanded)."""
    args = payload.get("args") or []
    if isinstance(args, str):
        return shlex.split(args)
    return [str(arg) for arg in args]


def allow_list_error(name: str) -> str | None:
    allowed = app_settings.COMMAND_ALLOWLIST
    if name not in allowed:
        return (
            f"command {name!r} is not allowed; allowed commands: {', '.join(allowed) or 'none'} "
            "(setting TASKS_COMMAND_ALLOWLIST)"
        )
    if name not in get_commands():
        return f"command {name!r} is allow-listed but no installed app provides it"
    return None


def check_payload(payload: dict[str, JSON]) -> None:
    messages = []
    error = allow_list_error(str(payload["command"]))
    if error:
        messages.append(f"command: {error}")
    try:
        arguments(payload)
    except ValueError as exc:
        messages.append(f"args: cannot be split into arguments: {exc}")
    if messages:
        raise PayloadError(messages)


@register(
    "command",
    schema=SCHEMA,
    description="Runs an allow-listed Django management command (TASKS_COMMAND_ALLOWLIST).",
    validate=check_payload,
    permission="tasks_app.use_action_command",
)
def run_command(payload: dict[str, JSON], ctx: RunContext) -> Outcome:
    name = str(payload["command"])
    error = allow_list_error(name)
    if error:
        raise ActionError(error, retryable=False)
    try:
        args = arguments(payload)
    except ValueError as exc:
        raise ActionError(f"args: cannot be split into arguments: {exc}", retryable=False) from exc
    out = CappedBuffer(app_settings.OUTPUT_LIMIT_BYTES)
    try:
        call_command(name, *args, stdout=out, stderr=out)
    except (CommandError, SystemExit) as exc:
        detail = f"{type(exc).__name__}: {exc}"
        raise ActionError(
            f"command {name} failed: {detail}\n\n{out.getvalue()}", retryable=False
        ) from exc
    return Outcome(
        output=out.getvalue(),
        result={"command": name, "args": args, "output_bytes": out.written},
    )
