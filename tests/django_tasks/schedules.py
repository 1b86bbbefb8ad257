"""Policies of ``@task`` functions declared in code, as a project's schedules module would."""

from tasks_app.schedules import function_policy
from tests.django_tasks import functions

SCHEDULES = [function_policy(functions.flaky, max_retries=2, retry_backoff_seconds=1)]
