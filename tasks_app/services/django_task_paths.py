"""Which ``@task`` functions the ``django_task`` action may call: ``TASKS_DJANGO_TASKS``.

A person who writes a ``django_task`` payload (the admin, the API, the CLI, a declared
schedule) names a dotted path, and resolving it imports the module: its top-level code runs
in the process that checks it. So the path must match one of the setting's patterns first
(``tasks_app.actions.allowlist``, the same matching as ``TASKS_CELERY_TASKS``), before
anything is imported: when the form checks the payload, when the task is saved and again
when a run starts (the setting may have narrowed since).

Enqueues from code are not governed: ``.enqueue()`` of a ``@task`` function through
``CeleryRunBackend`` writes its task as :data:`ENQUEUED_BY`, and the function is the
caller's own, already imported. Such a task runs whatever the setting says until a person
saves it; from then on it is held to the setting like any other. So a project needs the
setting only to let people choose ``@task`` functions.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ..actions.allowlist import matches, unmatched
from ..conf import app_settings
from ..models import TaskAuditEntry

SETTING = "TASKS_DJANGO_TASKS"
# The action that calls a @task function inside a run (tasks_app/django_tasks/action.py).
ACTION = "django_task"
# Who the audit trail names as the creator of the tasks enqueues write
# (``services.django_task.django_task_enqueue``).
ENQUEUED_BY = "django.tasks"
# Events of the audit trail that write a task's definition.
DEFINITION_EVENTS = ("created", "updated")

# Set while the services save a task written by an enqueue from code (``task_save``).
_from_code: ContextVar[bool] = ContextVar("django_task_from_code", default=False)


@contextmanager
def saved_by(by: object) -> Iterator[None]:
    """While a task is checked and saved on behalf of ``by``: an enqueue from code (the
    actor :data:`ENQUEUED_BY`, a name, never a user) is not held to the setting."""
    token = _from_code.set(isinstance(by, str) and by == ENQUEUED_BY)
    try:
        yield
    finally:
        _from_code.reset(token)


def path_refusal(path: str) -> str | None:
    """Why a person may not choose the ``@task`` function at ``path`` (``None``: they may,
    or an enqueue from code is being saved). Imports nothing."""
    if _from_code.get() or matches(path, app_settings.DJANGO_TASKS):
        return None
    return unmatched(path, app_settings.DJANGO_TASKS, setting=SETTING)


def run_refusal(path: str, *, task_id: str) -> str | None:
    """Why a run of the task ``task_id`` may not call ``path`` now (``None``: it may): the
    setting admits it, or only enqueues from code ever wrote the task. Imports nothing."""
    if matches(path, app_settings.DJANGO_TASKS):
        return None
    writers = set(
        TaskAuditEntry.objects.filter(task_id=task_id, event__in=DEFINITION_EVENTS)
        .order_by()
        .values_list("by", flat=True)
        .distinct()[:2]
    )
    if writers == {ENQUEUED_BY}:
        return None
    return unmatched(path, app_settings.DJANGO_TASKS, setting=SETTING)
