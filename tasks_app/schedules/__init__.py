"""Schedules declared in code: ``Schedule(id, **fields)``, listed in ``SCHEDULES`` of the
module named by ``TASKS_SCHEDULES_MODULE``, applied by ``manage.py tasks sync``.

::

    # project/schedules.py
    from tasks_app.schedules import Schedule

    SCHEDULES = [
        Schedule(
            "nightly-report",
            action="command",
            payload={"command": "check"},
            schedule_type="cron",
            cron="0 3 * * *",
            timezone="Europe/Paris",
            max_retries=2,
        ),
    ]

The keywords are the REST API's task fields (``action``, ``payload``, ``schedule_type``,
``interval_seconds``, ``cron``, ``timezone``, ``run_at``, the policies, ``queue``,
``priority``, ...); a field left out takes its default, as in a ``POST /api/tasks``, so a
definition states the whole task. ``manage.py tasks sync`` checks every definition with the
API's rules before it writes anything, then creates, updates and removes tasks to match the
list, in one transaction (``--plan`` shows the difference, ``--check`` exits 1 while there
is one).

A ``@task`` function's policies are declared beside them, with no schedule: its calls are
its runs, and ``function_policy`` names the function's task for you::

    from myapp.tasks import send_welcome_email

    SCHEDULES = [
        function_policy(send_welcome_email, max_retries=3, retry_backoff_seconds=30),
    ]

The package: ``definition`` (the ``Schedule`` type, ``function_policy``), ``sync`` (plan and apply a declared
set, all or nothing, the set's rows written by ``services.tasks.tasks_save`` and
``tasks_delete`` in a few statements).
"""

from .definition import Schedule, function_policy

__all__ = ["Schedule", "function_policy"]
