"""The schedules this project declares in code (``TASKS_SCHEDULES_MODULE``).

``python manage.py tasks sync`` makes the database match ``SCHEDULES`` (the release step of
the Procfile runs it after ``migrate``): a task listed here is created or updated, a task
that was listed and is gone is removed (its runs are kept). A task declared here is
read-only in the admin, the API and the CLI; operators can still run it now, pause, resume
and backfill it. ``--plan`` prints what would change, ``--check`` exits 1 while the
database differs (for CI). The keywords of ``Schedule`` are the REST API's task fields.

Example::

    from tasks_app.schedules import Schedule

    SCHEDULES = [
        Schedule(
            "clear-sessions",
            name="Delete expired sessions",
            action="command",
            payload={"command": "clearsessions"},
            schedule_type="cron",
            cron="0 4 * * *",
            timezone="Europe/Paris",
        ),
        Schedule(
            "heartbeat-webhook",
            action="http",
            payload={"url": "https://status.example.com/ping", "method": "POST"},
            schedule_type="interval",
            interval_seconds=300,
            overlap_policy="skip",
        ),
    ]
"""

from tasks_app.schedules import Schedule

SCHEDULES: list[Schedule] = []
