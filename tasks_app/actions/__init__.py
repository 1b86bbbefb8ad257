"""The action registry: named callables with a JSON Schema for their payload.

Register your own in any installed app (imported from its ``AppConfig.ready``)::

    from tasks_app import actions

    @actions.register(
        "send-reminder-email",
        schema={"type": "object", "required": ["to"], "properties": {"to": {"type": "string"}}},
        description="Email a reminder.",
    )
    def send_reminder_email(payload: dict, ctx: actions.RunContext) -> str:
        ...
        return "sent"

An action returns its output text (``str``), an :class:`Outcome` (output + JSON result), or
``None``; raising an exception fails the run. A payload that breaks the schema is refused
when the task is saved; rules a schema cannot express (an allow-list read from settings, an
e-mail address check) go in an optional ``validate(payload)`` callable that raises
:class:`PayloadError`, run after the schema passes.
"""

from . import builtin, celery_task, command, email, http, program  # noqa: F401  (register the built-in actions)
from .base import (
    JSON,
    Action,
    ActionError,
    ActionFunc,
    Cancelled,
    Outcome,
    PayloadCheck,
    PayloadError,
    Raised,
    RunContext,
    all_actions,
    cancel_requested,
    get,
    raise_if_cancelled,
    register,
)

__all__ = [
    "JSON",
    "Action",
    "ActionError",
    "ActionFunc",
    "Cancelled",
    "Outcome",
    "PayloadCheck",
    "PayloadError",
    "Raised",
    "RunContext",
    "all_actions",
    "cancel_requested",
    "get",
    "raise_if_cancelled",
    "register",
]
