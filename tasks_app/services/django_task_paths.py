"""Which ``@task`` functions the ``django_task`` action may call: ``TASKS_DJANGO_TASKS``.

A person who writes a ``django_task`` payload (the admin, the API, the CLI, a declared
schedule) names a dotted path, and resolving it imports the module: its top-level code runs
in the process that checks it. So the path must match one of the setting's patterns first
(``tasks_app.actions.allowlist``, the same matching as ``TASKS_CELERY_TASKS``), before
anything is imported: when the form checks the payload, when the task is saved and again
when a run starts (the setting may have narrowed since).

Functions chosen in code are not governed: ``.enqueue()`` of a ``@task`` function runs
under the function's own task, named after it (:func:`function_task_id`) and made by the
enqueue or by a declaration in code (``function_policy``); the function is the caller's
own, already imported. Such a task's runs call it whatever the setting says, and an operator
who edits the task's policies, or runs it now with other arguments of the same function,
chooses no function. A person who makes a task named after a function, or points a task at
another function, is held to the setting like any other. So a project needs the setting
only to let people choose ``@task`` functions.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

from django.apps import apps

from ..actions.allowlist import matches, unmatched
from ..conf import app_settings
from ..runtime.task_framework import ACTION, Task, function_task_id

if TYPE_CHECKING:
    from ..models import Task as TaskRow

SETTING = "TASKS_DJANGO_TASKS"
# Who the audit trail names as the creator of the tasks enqueues write
# (``services.django_task.django_task_enqueue``).
ENQUEUED_BY = "django.tasks"

# Set while the services check a payload that calls the function its task is named after.
_own_function: ContextVar[bool] = ContextVar("django_task_own_function", default=False)


def own_function(task_id: str, payload: object) -> bool:
    """Whether ``payload`` calls the ``@task`` function the task ``task_id`` is named after
    (:func:`function_task_id`): its own function, which code chose, not a person."""
    path = payload.get("task") if isinstance(payload, dict) else None
    return isinstance(path, str) and function_task_id(path) == task_id


def chosen_in_code(
    task: TaskRow, *, previous: TaskRow | None, by: object = "", declared: bool = False
) -> bool:
    """Whether ``task`` calls its own ``@task`` function as code chose it, so that the
    function is not held to the setting: the task is made by an enqueue (``by``
    :data:`ENQUEUED_BY`), declared in code (``declared``: ``function_policy``, written or
    planned by ``tasks sync``), or was already the function's own (``previous``). The one
    statement of the rule: ``task_save`` and the sync's plan both ask it."""
    return own_function(task.pk, task.payload) and (
        by == ENQUEUED_BY
        or declared
        or (previous is not None and own_function(previous.pk, previous.payload))
    )


@contextmanager
def own_function_checked(yes: bool) -> Iterator[None]:
    """While a payload is checked and saved that calls its task's own function, which code
    chose (``yes``): that function is not held to the setting."""
    token = _own_function.set(yes)
    try:
        yield
    finally:
        _own_function.reset(token)


def path_refusal(path: str) -> str | None:
    """Why a person may not choose the ``@task`` function at ``path`` (``None``: they may,
    or it is the function of the task being checked). Imports nothing."""
    if _own_function.get() or matches(path, app_settings.DJANGO_TASKS):
        return None
    return unmatched(path, app_settings.DJANGO_TASKS, setting=SETTING)


def run_refusal(path: str, *, task_id: str) -> str | None:
    """Why a run of the task ``task_id`` may not call ``path`` now (``None``: it may): the
    setting admits it, or the task is the function's own. Imports nothing, reads nothing."""
    return None if function_task_id(path) == task_id else path_refusal(path)


def function_of_id(task_id: str) -> str | None:
    """The dotted path of the importable ``@task`` function whose own task has the id
    ``task_id`` (its enqueues are that task's runs), or ``None``.

    To know, the module is imported only where importing is already the project's choice:
    a module already imported, one inside an installed app's package (where Django and
    Celery look for modules themselves), or one ``TASKS_DJANGO_TASKS`` admits; never any
    other module a person names. A module that fails to import holds no function."""
    module_path, _, name = task_id.rpartition(".")
    if not module_path or not name.isidentifier():
        return None
    module = sys.modules.get(module_path)
    if module is None:
        if apps.get_containing_app_config(module_path) is None and not matches(
            task_id, app_settings.DJANGO_TASKS
        ):
            return None
        try:
            module = importlib.import_module(module_path)
        except Exception:  # not importable (or broken): no function to reserve the id for
            return None
    found = getattr(module, name, None)
    if isinstance(found, Task) and function_task_id(found.module_path) == task_id:
        return str(found.module_path)
    return None


def id_refusal(task: TaskRow) -> str | None:
    """Why ``task`` may not have its id (``None``: it may): the id is a ``@task``
    function's, whose enqueues need that task, and only the function's own task (action
    ``django_task`` calling that function) may hold it. Asked of every task saved, whoever
    saves it (admin, API, CLI, a declared schedule)."""
    path = function_of_id(str(task.pk or ""))
    if path is None or (task.action == ACTION and own_function(task.pk, task.payload)):
        return None
    return (
        f"{task.pk!r} is the id of the task of the @task function {path} (its enqueues "
        "are that task's runs): choose another id"
    )
