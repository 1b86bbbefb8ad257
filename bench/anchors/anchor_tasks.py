"""The no-op ``@task`` each anchor enqueues (never run: no worker is started)."""

import django

if django.VERSION >= (6, 0):
    from django.tasks import task
else:
    from django_tasks import task


@task
def noop(i: int) -> int:
    return i
