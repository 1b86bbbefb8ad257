"""A ``@task`` function's calls deduplicated by a policy declared in code."""

from tasks_app.schedules import function_policy
from tests.django_tasks import functions

SCHEDULES = [function_policy(functions.notify, unique_on="user_id", unique_for_seconds=30)]
