"""A schedules module that declares a task of its own under a ``@task`` function's id."""

from tasks_app.schedules import Schedule

SCHEDULES = [Schedule("tests.django_tasks.functions.add", action="noop")]
