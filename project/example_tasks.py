"""An example of your own code on Django's task framework: ``docs/django-tasks.md`` puts
``send_digest`` on a weekly cron with the ``django_task`` action. Delete it in your project."""

from __future__ import annotations

import django

if django.VERSION >= (6, 0):
    from django.tasks import task  # type: ignore[import-not-found,unused-ignore]
else:  # Django 5.2: the django-tasks backport
    from django_tasks import task


@task
def send_digest(since_days: int = 7) -> str:
    """What a digest task would do: here, say what it covers."""
    return f"digest of the last {since_days} days"
