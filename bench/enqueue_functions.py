"""The ``@task`` function the ``enqueue`` scenario enqueues (never run: nothing consumes)."""

import django

if django.VERSION >= (6, 0):
    from django.tasks import task
else:
    from django_tasks import task


@task
def noop(i: int) -> int:
    return i
