"""Built-in actions for tests, demos and benchmarks: noop, echo, sleep, fail."""

from __future__ import annotations

import time

from .base import JSON, ActionError, RunContext, register


@register("noop", schema={"type": "object"}, description="Does nothing.")
def noop(payload: dict[str, JSON], ctx: RunContext) -> None:
    return None


@register(
    "echo",
    schema={
        "type": "object",
        "properties": {"message": {"type": "string", "maxLength": 1_000_000}},
        "required": ["message"],
    },
    description="Returns payload.message as the run's output.",
)
def echo(payload: dict[str, JSON], ctx: RunContext) -> str:
    return str(payload["message"])


@register(
    "sleep",
    schema={
        "type": "object",
        "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 86400}},
        "required": ["seconds"],
    },
    description="Sleeps payload.seconds.",
)
def sleep(payload: dict[str, JSON], ctx: RunContext) -> str:
    time.sleep(float(payload["seconds"]))
    return f"slept {payload['seconds']} s"


@register(
    "fail",
    schema={"type": "object", "properties": {"message": {"type": "string"}}},
    description="Raises an error with payload.message.",
)
def fail(payload: dict[str, JSON], ctx: RunContext) -> None:
    raise ActionError(str(payload.get("message") or "failed on purpose"))
