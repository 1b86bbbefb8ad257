"""Who may use which action: the one place that decides it.

Model permissions (``add_task``, ``change_task``, ``add_run``, ...) say what a user may do
with tasks and runs; they do not say *what* a task may do. An action registered with a
``permission`` (the built-in ``exec``, ``command``, ``http`` and ``email``: the model
permissions ``tasks_app.use_action_<name>``) may only be used by users holding it: to
create a task with it, change such a task (its action, payload, schedule or anything else,
or change another task to it), resume it, or run it by an explicit trigger (execute, run
now, a one-off schedule, backfill, retry). Like every Django permission it is held by
superusers and granted to nobody else until an administrator does. ``noop``, ``echo``,
``sleep`` and ``fail`` need none.

The admin, the API and the CLI (``--as USER``) call :func:`check_actions` before the
service; the admin also offers only :func:`usable_actions` in its action list.
"""

from __future__ import annotations

from typing import Any, Protocol

from django.core.exceptions import PermissionDenied

from . import actions

# What a user needs, per operation: the CLI when it acts as that user (``--as``), and the
# API views of the same operations (their ``required_perms``, ``api.permissions``).
OPERATION_PERMISSIONS: dict[str, list[str]] = {
    "create": ["add_task"],
    "list": ["view_task"],
    "get": ["view_task"],
    "preview": ["view_task"],
    "update": ["view_task", "change_task"],
    "delete": ["view_task", "delete_task"],
    "execute": ["view_task", "add_run"],
    "schedule": ["view_task", "change_task", "add_run"],
    "pause": ["view_task", "change_task"],
    "resume": ["view_task", "change_task"],
    "backfill": ["view_task", "add_run"],
    "runs": ["view_run"],
    "show": ["view_run"],
    "wait": ["view_run"],
    "cancel": ["view_run", "change_run"],
    "retry": ["view_run", "add_run"],
}


class User(Protocol):
    def has_perm(self, perm: str, obj: Any = None) -> bool: ...


class ActionNotPermitted(PermissionDenied):
    """The user lacks the permission an action needs (HTTP 403 naming the permission)."""

    def __init__(self, action: str, permission: str) -> None:
        self.action = action
        self.permission = permission
        super().__init__(
            f"the {action} action needs the permission {permission}, which you do not hold"
        )

    @property
    def sentence(self) -> str:
        """The message as a sentence, for a form error or an API error."""
        text = str(self)
        return f"{text[0].upper()}{text[1:]}."


def required_permission(action: str) -> str | None:
    """The permission ``action`` needs, or ``None`` (also for an unregistered name: saving
    refuses it anyway, and a task already stored with one is not made unchangeable)."""
    try:
        return actions.get(action).permission
    except KeyError:
        return None


def may_use(user: User, action: str) -> bool:
    permission = required_permission(action)
    return permission is None or user.has_perm(permission)


def usable_actions(user: User) -> list[actions.Action]:
    """The registered actions ``user`` may use, by name."""
    return [a for a in actions.all_actions() if may_use(user, a.name)]


def check_actions(user: User, *names: str) -> None:
    """Raise :class:`ActionNotPermitted` for the first of ``names`` that ``user`` may not
    use. Give the stored and the new action when a task changes: both are checked."""
    for name in dict.fromkeys(names):
        permission = required_permission(name)
        if permission is not None and not user.has_perm(permission):
            raise ActionNotPermitted(name, permission)


def missing_permissions(user: User, operation: str) -> list[str]:
    """The model permissions ``user`` lacks for ``operation`` (see ``OPERATION_PERMISSIONS``)."""
    needed = [f"tasks_app.{codename}" for codename in OPERATION_PERMISSIONS[operation]]
    return [p for p in needed if not user.has_perm(p)]
