"""Who may do what: the one place that decides it.

Model permissions say what a user may do with tasks and runs, per operation
(``OPERATION_PERMISSIONS``); every way in asks this one table. The services decide: called
with ``by=`` a user (the admin's, the API's, the CLI's ``--as``) they refuse what the user
may not do with :class:`OperationNotPermitted` or :class:`ActionNotPermitted`, before
writing anything; called with ``by=`` a name (beat, the trusted CLI operator, ``system``)
they do not check. The entry points translate the refusal (API 403, CLI one line and exit
status 1, admin message or 403) and use :func:`allows` to offer only what the user may do;
the reads (lists, pages, the overview) ask :func:`authorize` themselves.

Model permissions (``add_task``, ``change_task``, ``add_run``, ...) say what a user may do
with tasks and runs; they do not say *what* a task may do. An action registered with a
``permission`` (the built-in ``exec``, ``command``, ``http`` and ``email``: the model
permissions ``tasks_app.use_action_<name>``) may only be used by users holding it: to
create a task with it, change such a task (its action, payload, schedule or anything else,
or change another task to it), resume it, or run it by an explicit trigger (execute, run
now, a one-off schedule, backfill, retry). Like every Django permission it is held by
superusers and granted to nobody else until an administrator does. ``noop``, ``echo``,
``sleep`` and ``fail`` need none.

Creating a run by any route needs ``add_run``: run now, a one-off schedule, a task created
or changed with a delay, a task saved with a schedule (``once``, ``interval`` or ``cron``) that
is new or changed (``services.tasks.schedule_makes_runs``, whichever entry point saves it), a
duplicate of a scheduled task, backfill, retry.
"""

from __future__ import annotations

from typing import Any, Protocol

from django.core.exceptions import PermissionDenied

from .. import actions

# What a user needs, per operation (codenames of ``tasks_app`` model permissions).
OPERATION_PERMISSIONS: dict[str, list[str]] = {
    "create": ["add_task"],
    "list": ["view_task"],
    "get": ["view_task"],
    "preview": ["view_task"],  # a stored task's next fires (the form's helpers: as its save)
    "actions": ["view_task"],
    "update": ["view_task", "change_task"],
    "delete": ["view_task", "delete_task", "delete_run"],  # its runs go with it
    "duplicate": ["view_task", "add_task"],
    "execute": ["view_task", "add_run"],
    "schedule": ["view_task", "change_task", "add_run"],
    "pause": ["view_task", "change_task"],
    "resume": ["view_task", "change_task"],
    "backfill": ["view_task", "add_run"],
    "task_runs": ["view_task", "view_run"],
    "runs": ["view_run"],
    "show": ["view_run"],
    "wait": ["view_run"],
    "cancel": ["view_run", "change_run"],
    "retry": ["view_run", "add_run"],
    "prune": ["view_run", "delete_run"],
    "overview": ["view_task", "view_run"],
    # A queue's pause stops every task on it: the pause row's own model permissions.
    "queues": ["view_queuepause"],
    "pause-queue": ["view_queuepause", "add_queuepause"],
    "resume-queue": ["view_queuepause", "delete_queuepause"],
}
# A write that also creates runs (a delay, a schedule set or changed) needs this besides.
RUN_PERMISSION = "add_run"


class User(Protocol):
    def has_perm(self, perm: str, obj: Any = None) -> bool: ...

    def get_username(self) -> str: ...


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


def missing_permissions(user: User, operation: str, *, creates_run: bool = False) -> list[str]:
    """The model permissions ``user`` lacks for ``operation`` (see ``OPERATION_PERMISSIONS``);
    ``creates_run``: this call also creates a run, which needs ``add_run``."""
    codenames = [*OPERATION_PERMISSIONS[operation], *([RUN_PERMISSION] if creates_run else [])]
    needed = [f"tasks_app.{codename}" for codename in dict.fromkeys(codenames)]
    return [p for p in needed if not user.has_perm(p)]


class OperationNotPermitted(PermissionDenied):
    """The user lacks a model permission ``operation`` needs (HTTP 403 naming it)."""

    def __init__(self, operation: str, missing: list[str], username: str) -> None:
        self.operation = operation
        self.missing = missing
        super().__init__(
            f"{operation} needs {', '.join(missing)}, which {username or 'you'} does not hold"
        )


Actor = str | User
"""Who calls a service: a user (checked) or a name (beat, the trusted CLI operator: not)."""


def is_user(by: Any) -> bool:
    return not isinstance(by, str)


def actor_name(by: Actor) -> str:
    """The name the audit trail records for ``by``."""
    return by if isinstance(by, str) else str(by.get_username())


def allows(user: User, operation: str, *, creates_run: bool = False) -> bool:
    """Whether ``user`` holds every model permission ``operation`` needs."""
    return not missing_permissions(user, operation, creates_run=creates_run)


def authorize(
    by: Actor, operation: str, *, action: str | tuple[str, ...] = (), creates_run: bool = False
) -> str:
    """Refuse ``operation`` unless ``by`` may do it (and use ``action``: one name, or the
    stored and the new one of a change); answer the name for the audit trail.

    A name (not a user) is trusted and not checked: beat, ``system``, the CLI without
    ``--as``. Raises :class:`OperationNotPermitted` or :class:`ActionNotPermitted`.
    """
    if isinstance(by, str):
        return by
    missing = missing_permissions(by, operation, creates_run=creates_run)
    if missing:
        raise OperationNotPermitted(operation, missing, actor_name(by))
    check_actions(by, *((action,) if isinstance(action, str) else action))
    return actor_name(by)


# --- rules that are not a model permission (the user's flags), decided here too -------------

# Where a task's stored credential goes is part of the task: a run's own payload may send it
# to another URL (origin or path) only for a user who may change the task.
DESTINATION_CHANGE_PERMISSION = "tasks_app.change_task"


def may_send_secrets_elsewhere(by: Actor) -> bool:
    """Whether ``by`` may run a task with its stored secrets sent to another URL than the
    task's own (``secret_fields.secrets_sent_elsewhere``): a trusted name may, a user needs
    ``change_task``."""
    return isinstance(by, str) or by.has_perm(DESTINATION_CHANGE_PERMISSION)


def may_mint_tokens(user: Any) -> bool:
    """Whether ``user`` may mint an API token in the admin: a token for another user is that
    user's power, so only a superuser may (``manage.py api_token create`` is the other way)."""
    return bool(getattr(user, "is_superuser", False))


def sees_health_details(user: Any) -> bool:
    """Whether ``user`` sees why a health check failed (``/api/health``): staff do; anyone
    else, anonymous callers included, reads only that it failed."""
    return bool(getattr(user, "is_staff", False))
