"""The ``celery`` action: one of your own Celery tasks (``@shared_task`` / ``@app.task``),
called inside the run.

Payload ``{"task": NAME, "args": [...], "kwargs": {...}}``. ``NAME`` must match one of the
shell-style patterns of ``TASKS_CELERY_TASKS`` (``myapp.tasks.*``; empty by default, so no
task is allowed) and be registered in the Celery app, both checked when the task is saved
and again when it runs (the setting or the code may have changed in between).

The task's function runs in the worker process executing the run, not as a second broker
message: the run's time limit applies to it, an exception fails the run and goes through
the run's retries (a ``self.retry()`` inside it raises, so it too is one of the run's
retries, never a Celery retry of its own), and a JSON-serializable return value becomes the
run's ``result``. Inside the task, ``self.request.id`` is the run id and
``self.request.retries`` the number of earlier attempts.

This app's own entry points (``tasks_app.*``) and Celery's built-in tasks (``celery.*``) are
never allowed, whatever the patterns say: they are not units of work.
"""

from __future__ import annotations

import json
from typing import Any

from celery import current_app
from celery.app.task import Task as CeleryTask

from ..conf import app_settings
from .allowlist import matches, unmatched
from .base import JSON, ActionError, Outcome, PayloadError, RunContext, register

NEVER_ALLOWED = ("tasks_app.*", "celery.*")
SETTING = "TASKS_CELERY_TASKS"

SCHEMA: dict[str, JSON] = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "minLength": 1, "maxLength": 200},
        "args": {"type": "array", "maxItems": 1000},
        "kwargs": {"type": "object"},
    },
    "required": ["task"],
    "additionalProperties": False,
}

_discovered = False


def registered_tasks() -> dict[str, CeleryTask]:
    """The Celery app's registered tasks, after its autodiscovery has run (a web process
    never starts a worker, which is what would otherwise import the apps' ``tasks`` modules)."""
    global _discovered
    app = current_app
    if not _discovered:
        app.loader.import_default_modules()
        _discovered = True
    return dict(app.tasks)


def patterns() -> list[str]:
    return list(app_settings.CELERY_TASKS)


def is_allowed(name: str) -> bool:
    return not matches(name, NEVER_ALLOWED) and matches(name, patterns())


def allowed_names() -> list[str]:
    """The registered task names the patterns allow (what the admin's payload form offers)."""
    return sorted(name for name in registered_tasks() if is_allowed(name))


def task_error(name: str) -> str | None:
    """Why the task ``name`` cannot be run, or ``None``."""
    if not is_allowed(name):
        if matches(name, NEVER_ALLOWED):
            return f"{name!r} is one of the task system's own or Celery's built-in tasks"
        return unmatched(name, patterns(), setting=SETTING)
    if name not in registered_tasks():
        return f"{name!r} is allowed by {SETTING} but no Celery task of that name is registered"
    return None


def check_payload(payload: dict[str, JSON]) -> None:
    error = task_error(str(payload["task"]))
    if error:
        raise PayloadError([f"task: {error}"])


def form_schema() -> dict[str, JSON]:
    """The payload schema with the names a run may call, for the admin's payload form."""
    names = allowed_names()
    task: dict[str, JSON] = {**SCHEMA["properties"]["task"]}
    if names:
        task["enum"] = names
    return {**SCHEMA, "properties": {**SCHEMA["properties"], "task": task}}


@register(
    "celery",
    schema=SCHEMA,
    description=f"Calls one of your Celery tasks inside the run ({SETTING}).",
    validate=check_payload,
    permission="tasks_app.use_action_celery",
    form_schema=form_schema,
)
def run_celery_task(payload: dict[str, JSON], ctx: RunContext) -> Outcome:
    name = str(payload["task"])
    error = task_error(name)
    if error:
        raise ActionError(error, retryable=False)
    task = registered_tasks()[name]
    args = list(payload.get("args") or [])
    kwargs = dict(payload.get("kwargs") or {})
    value = call(task, args, kwargs, ctx)
    return outcome(value)


def call(task: CeleryTask, args: list[Any], kwargs: dict[str, Any], ctx: RunContext) -> Any:
    """``task(*args, **kwargs)``: the task's own ``__call__`` (so a custom base class still
    wraps it), under a request carrying the run id. ``called_directly`` stays true, so
    ``self.retry()`` raises instead of publishing a message."""
    task.push_request(
        id=ctx.run_id,
        args=args,
        kwargs=kwargs,
        retries=max(ctx.attempt - 1, 0),
        timelimit=(ctx.timeout_seconds, ctx.timeout_seconds),
    )
    try:
        return task(*args, **kwargs)
    finally:
        task.pop_request()


def outcome(value: Any) -> Outcome:
    """A JSON-serializable return value is the run's result (and, as JSON, its output);
    another one is only described in the output."""
    if value is None:
        return Outcome()
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return Outcome(
            output=f"returned a {type(value).__name__}, not JSON-serializable: {value!r}"[:10_000]
        )
    return Outcome(output=text, result=value)
