"""Django's task framework on our runs: the ``CeleryRunBackend`` and the ``django_task``
action.

Django 6.0 ships the framework as ``django.tasks``; on Django 5.2 the ``django-tasks``
backport provides the same API as ``django_tasks``. Both are imported in one place
(``framework``), so the rest of the app never asks which Django it runs on::

    # settings.py
    TASKS = {"default": {"BACKEND": "tasks_app.django_tasks.CeleryRunBackend"}}

    # myapp/tasks.py
    from django.tasks import task            # Django 5.2: from django_tasks import task

    @task
    def send_welcome_email(user_id: int) -> str: ...

    result = send_welcome_email.using(run_after=in_an_hour).enqueue(42)
    send_welcome_email.get_result(result.id).status   # READY, RUNNING, SUCCESSFUL, FAILED

Each ``@task`` function has one task (named by its dotted path, action ``django_task``),
made on its first enqueue; each enqueue is a run of it carrying the call (its arguments,
queue and priority), written in one statement and published when the surrounding
transaction commits, so it has the whole lifecycle: pages in the admin, ``GET
/api/runs/{id}``, ``tasks runs``, the function's retries, expiry and pause, metrics. The
``TaskResult`` id **is** the run's id. ``run_after`` makes the run due at that instant (a
time in the past: due now); ``priority`` (-100..100) maps order-preserving onto ours (0..9,
``framework.run_priority``); ``queue_name`` is one of ``TASKS_QUEUES`` (Django's
``"default"`` is the function's task's queue). ``enqueue_many(task, calls)`` writes a batch
in one statement. Arguments and return values must survive JSON; other arguments are
refused at enqueue with a ``TypeError`` naming the argument.

Modules: ``framework`` (the framework's names on either Django; pure checks), ``results``
(a run as a ``TaskResult``), ``backend`` (``CeleryRunBackend``), ``action`` (the
``django_task`` action, which sends ``task_started`` and ``task_finished``).
"""

from typing import TYPE_CHECKING, Any

from .framework import (
    InvalidTask,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_enqueued,
    task_finished,
    task_started,
)

if TYPE_CHECKING:
    from .backend import CeleryRunBackend, enqueue_many

__all__ = [
    "CeleryRunBackend",
    "InvalidTask",
    "Task",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "enqueue_many",
    "task_enqueued",
    "task_finished",
    "task_started",
]


def __getattr__(name: str) -> Any:
    """``CeleryRunBackend`` and ``enqueue_many`` on first use: the backend reaches the models
    and the services, which the pure ``framework`` (read by them, and by declarations in
    ``tasks_app.schedules``) must be importable without."""
    if name in ("CeleryRunBackend", "enqueue_many"):
        from . import backend

        return getattr(backend, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
