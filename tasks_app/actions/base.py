"""The registry itself: the ``Action`` record, ``register``, ``get`` and the errors and
context an action deals with (``tasks_app.actions`` re-exports all of it)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from . import cancellation

JSON = Any


@dataclass(frozen=True)
class RunContext:
    """What an action knows about the run it serves. Key side effects by ``run_id``."""

    run_id: str
    task_id: str
    attempt: int
    scheduled_for: datetime
    due_at: datetime
    timeout_seconds: int | None = None
    first_attempt_id: str = ""  # the same for every attempt: key once-per-run effects by it
    created_at: datetime | None = None  # when this attempt was created
    started_at: datetime | None = None  # when this attempt was claimed
    worker: str = ""  # the worker that claimed it

    def cancel_requested(self) -> bool:
        """Whether a person asked this run to stop (seen within ``TASKS_CANCEL_CHECK_SECONDS``
        of the request). Poll it between steps and return when it is true: the run ends
        ``cancelled``; an action that goes on is ended with its process after
        ``TASKS_CANCEL_GRACE_SECONDS``."""
        return cancellation.requested(self.run_id)

    def raise_if_cancelled(self) -> None:
        """Raise ``actions.Cancelled`` if a person asked this run to stop."""
        if cancellation.requested(self.run_id):
            raise Cancelled(self.run_id)


@dataclass(frozen=True)
class Outcome:
    output: str = ""
    result: JSON = None


ActionFunc = Callable[[dict[str, JSON], RunContext], "str | Outcome | None"]
PayloadCheck = Callable[[dict[str, JSON]], None]


class PayloadError(ValueError):
    """The payload does not fit the action's schema; ``messages`` name each path."""

    def __init__(self, messages: list[str]):
        super().__init__("; ".join(messages))
        self.messages = messages


class ActionError(Exception):
    """A failure an action reports on purpose. ``retryable=False`` skips retries."""

    def __init__(self, message: str, *, retryable: bool = True):
        super().__init__(message)
        self.retryable = retryable


class Raised(Exception):
    """A ``BaseException`` that is not an ``Exception`` (``SystemExit``, ``KeyboardInterrupt``)
    raised by the code an action calls, carried out of the action as a failure of the run:
    left to propagate it would end the worker's pool process, and the run would be taken for
    one lost with its worker. The run's error names and traces ``exception``."""

    def __init__(self, exception: BaseException):
        super().__init__(str(exception))
        self.exception = exception


class Cancelled(ActionError):
    """Raised by ``raise_if_cancelled()``: the run was asked to stop, and ends ``cancelled``
    (not retried). Raised with no request, the run fails without a retry."""

    def __init__(self, run_id: str = "") -> None:
        super().__init__(f"run {run_id} stopped at its cancel request", retryable=False)


def cancel_requested() -> bool:
    """Whether the run the calling thread executes was asked to stop (``False`` outside a
    run): for code that has no ``RunContext``, such as a ``@task`` function without a
    context. Poll it between steps of long work and return (or raise) when it is true."""
    run_id = cancellation.current_run_id()
    return run_id is not None and cancellation.requested(run_id)


def raise_if_cancelled() -> None:
    """Raise :class:`Cancelled` if the run the calling thread executes was asked to stop."""
    run_id = cancellation.current_run_id()
    if run_id is not None and cancellation.requested(run_id):
        raise Cancelled(run_id)


@dataclass(frozen=True)
class Action:
    name: str
    func: ActionFunc
    schema: dict[str, JSON]
    description: str = ""
    validator: Draft202012Validator = field(repr=False, compare=False, default=None)  # type: ignore[assignment]
    check: PayloadCheck | None = field(repr=False, compare=False, default=None)
    # The Django permission ("app_label.codename") a user needs to create, change or run a
    # task with this action; ``None``: model permissions on tasks are enough.
    permission: str | None = None
    # What the admin's payload form is built from, when it depends on the running system
    # (the ``celery`` action offers the registered task names); ``None``: ``schema``.
    form_schema: Callable[[], dict[str, JSON]] | None = field(
        repr=False, compare=False, default=None
    )
    # The payload property naming where the request goes (``"url"``): the write-only values
    # are bound to its origin and do not follow it elsewhere (``tasks_app.vocabulary.secret_fields``).
    secrets_bound_to: str | None = None

    def schema_for_form(self) -> dict[str, JSON]:
        return self.schema if self.form_schema is None else self.form_schema()

    def validate(self, payload: JSON) -> None:
        errors = sorted(self.validator.iter_errors(payload), key=lambda e: list(e.path))
        if errors:
            raise PayloadError([_describe(error, self.schema) for error in errors])
        if self.check is not None:
            self.check(payload)


def _describe(error: Any, schema: dict[str, JSON]) -> str:
    path = ".".join(str(part) for part in error.absolute_path)
    if _write_only(schema, error):
        # A write-only value (a credential) is not quoted back, as the schema's message
        # would: the rule it broke is named instead.
        return (
            f"{path}: does not satisfy the schema's {error.validator} "
            f"({json.dumps(error.validator_value)}); the value is not shown (write-only)"
        )
    return f"{path}: {error.message}" if path else error.message


def _write_only(schema: Any, error: Any) -> bool:
    """Whether ``error`` is about a value at or under a ``writeOnly`` property."""
    node = schema
    for part in error.absolute_path:
        props = node.get("properties") if isinstance(node, dict) else None
        if not isinstance(props, dict) or part not in props:
            return False
        node = props[part]
        if isinstance(node, dict) and node.get("writeOnly"):
            return True
    return False


_REGISTRY: dict[str, Action] = {}


def register(
    name: str,
    *,
    schema: dict[str, JSON] | None = None,
    description: str = "",
    validate: PayloadCheck | None = None,
    permission: str | None = None,
    form_schema: Callable[[], dict[str, JSON]] | None = None,
    secrets_bound_to: str | None = None,
) -> Callable[[ActionFunc], ActionFunc]:
    """Register ``func`` as the action ``name`` with a JSON Schema for its payload.

    ``validate``, if given, is called with a payload that passed the schema and raises
    :class:`PayloadError` for anything else the action refuses at save time.
    ``permission`` (``"app_label.codename"``), if given, is what a user must hold to create,
    change or run a task with this action (``tasks_app.services.permissions`` checks it).
    ``form_schema``, if given, returns the schema the admin's payload form is built from
    (``schema`` with choices only known at run time, such as registered names).
    ``secrets_bound_to``, if given, names the payload property holding the destination URL:
    the payload's write-only values are kept only while it stays on the same origin.
    """
    full_schema = schema or {"type": "object"}
    try:
        Draft202012Validator.check_schema(full_schema)
    except SchemaError as exc:
        raise ValueError(f"action {name!r}: invalid payload schema: {exc.message}") from exc

    def decorator(func: ActionFunc) -> ActionFunc:
        if name in _REGISTRY and _REGISTRY[name].func is not func:
            raise ValueError(f"action {name!r} is already registered")
        _REGISTRY[name] = Action(
            name=name,
            func=func,
            schema=full_schema,
            description=description or (func.__doc__ or "").strip().split("\n")[0],
            validator=Draft202012Validator(full_schema),
            check=validate,
            permission=permission,
            form_schema=form_schema,
            secrets_bound_to=secrets_bound_to,
        )
        return func

    return decorator


def get(name: str) -> Action:
    """The registered action ``name``; ``KeyError`` if there is none."""
    return _REGISTRY[name]


def all_actions() -> list[Action]:
    return sorted(_REGISTRY.values(), key=lambda a: a.name)
