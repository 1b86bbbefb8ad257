"""The ``django_task`` action: a function decorated with Django's ``@task``, called inside
the run with the payload's ``args`` and ``kwargs``.

Every enqueue through ``CeleryRunBackend`` is a task with this action; a task of your own
with it puts a ``@task`` function on an interval or a cron schedule (admin, API or CLI)::

    {"task": "myapp.tasks.send_digest", "args": [], "kwargs": {"since_days": 7}}

When the task is saved the function must import and be a ``@task``, and the arguments must
fit its signature. Its return value (JSON) is the run's ``result``; an exception fails the
run, which names the exception's class path and keeps its traceback; so does any other
``BaseException`` it raises (``SystemExit``, ``KeyboardInterrupt``): one failed attempt, not a
lost worker. ``task_started`` and
``task_finished`` are sent by the worker around the call (sender: the task's backend class).
"""

from __future__ import annotations

import traceback
from typing import Any

from ..actions import (
    JSON,
    ActionError,
    Outcome,
    PayloadError,
    Raised,
    RunContext,
    cancel_requested,
    raise_if_cancelled,
    register,
)
from ..models import Run
from ..runtime import clock
from ..services.django_task_paths import path_refusal, run_refusal
from .framework import (
    ACTION,
    RunEnded,
    TaskContext,
    TaskError,
    TaskResultStatus,
    call_problem,
    resolve,
    stored_json,
    task_finished,
    task_started,
)
from .results import started_result, task_result

SCHEMA = {
    "type": "object",
    "properties": {
        "task": {
            "type": "string",
            "minLength": 1,
            "maxLength": 300,
            "pattern": r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$",
            "description": "Dotted path of a function decorated with @task.",
        },
        "args": {"type": "array"},
        "kwargs": {"type": "object"},
        "using": {
            "type": "object",
            "description": "How the function was enqueued (Django's Task.using): written by "
            "the backend, given back by get_result.",
            "properties": {
                "priority": {"type": "integer", "minimum": -100, "maximum": 100},
                "queue_name": {"type": "string", "maxLength": 100},
                "run_after": {"type": ["string", "null"], "format": "date-time"},
            },
            "additionalProperties": False,
        },
    },
    "required": ["task"],
    "additionalProperties": False,
}


def check(payload: dict[str, JSON]) -> None:
    """The path is one ``TASKS_DJANGO_TASKS`` admits (before anything is imported), the
    function imports and is a ``@task``; the arguments, if given, fit its signature (a
    payload naming only the function is a function's task: its runs bring their own)."""
    refused = path_refusal(str(payload["task"]))
    if refused is not None:
        raise PayloadError([f"task: {refused}"])
    try:
        task = resolve(payload["task"])
    except ValueError as exc:
        raise PayloadError([f"task: {exc}"]) from exc
    if "args" not in payload and "kwargs" not in payload:
        return
    wrong = call_problem(task, payload.get("args") or [], payload.get("kwargs") or {})
    if wrong is not None:
        raise PayloadError([f"args/kwargs: {wrong}"])


class RunTaskContext(TaskContext):
    """Django's ``TaskContext`` of a ``@task`` function (``takes_context=True``) running as a
    run, which also says whether a person asked the run to stop: poll
    ``context.cancel_requested()`` (or call ``context.raise_if_cancelled()``) between steps and
    return when it is true; the run ends ``cancelled``. A function without a context asks
    ``tasks_app.actions.cancel_requested()``."""

    __slots__ = ()

    def cancel_requested(self) -> bool:
        return cancel_requested()

    def raise_if_cancelled(self) -> None:
        raise_if_cancelled()


@register(
    ACTION,
    schema=SCHEMA,
    validate=check,
    description="Calls a function decorated with Django's @task (payload: task, args, kwargs).",
    permission="tasks_app.use_action_django_task",
)
def django_task(payload: dict[str, JSON], ctx: RunContext) -> Outcome:
    refused = run_refusal(str(payload["task"]), task_id=ctx.task_id)
    if refused is not None:
        raise ActionError(refused, retryable=False)
    task = resolve(payload["task"])
    args, kwargs = list(payload.get("args") or []), dict(payload.get("kwargs") or {})
    sender = type(task.get_backend())
    if ctx.first_attempt_id == ctx.run_id:  # most runs: their first attempt, known here
        result = started_result(ctx, task=task, args=args, kwargs=kwargs)
    else:  # a later attempt reports the earlier ones too
        first = Run.objects.select_related("task").get(pk=ctx.first_attempt_id)
        result = task_result(first, task=task, backend=task.backend)  # RUNNING: this attempt
    task_started.send(sender, task_result=result)
    try:
        if task.takes_context:
            value = task.call(RunTaskContext(task_result=result), *args, **kwargs)
        else:
            value = task.call(*args, **kwargs)
        try:
            value = stored_json(value, "return value")
        except TypeError as exc:
            raise TypeError(f"{task.module_path}: {exc}; return values must survive JSON") from None
    except BaseException as exc:
        error = TaskError(
            exception_class_path=f"{type(exc).__module__}.{type(exc).__qualname__}",
            traceback="".join(traceback.format_exception(exc)),
        )
        _finish(result, TaskResultStatus.FAILED, errors=[*result.errors, error])
        task_finished.send(sender, task_result=result)
        if isinstance(exc, Exception):
            raise
        raise Raised(exc) from None  # SystemExit and the like: a failed attempt, as Django has it
    if cancel_requested():  # returned after its run was asked to stop: the run is cancelled
        stopped = TaskError(
            exception_class_path=f"{RunEnded.__module__}.{RunEnded.__qualname__}",
            traceback="cancelled: the function returned after its run was asked to stop",
        )
        _finish(result, TaskResultStatus.FAILED, errors=[*result.errors, stopped], value=value)
    else:
        _finish(result, TaskResultStatus.SUCCESSFUL, value=value)
    task_finished.send(sender, task_result=result)
    return Outcome(output="", result=value)


def _finish(
    result: Any, status: Any, *, errors: list[Any] | None = None, value: Any = None
) -> None:
    object.__setattr__(result, "status", status)
    object.__setattr__(result, "finished_at", clock.now())
    if errors is not None:
        object.__setattr__(result, "errors", errors)
    object.__setattr__(result, "_return_value", value)
