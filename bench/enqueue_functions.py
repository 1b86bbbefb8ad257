"""The ``@task`` functions the ``enqueue`` and ``enqueued_pages`` scenarios enqueue (never
run by the first; the second's runs are written as if they had run)."""

import django

if django.VERSION >= (6, 0):
    from django.tasks import task
else:
    from django_tasks import task


@task
def noop(i: int) -> int:
    return i


@task
def send_welcome_email(i: int) -> int:
    return i


@task
def make_thumbnail(i: int) -> int:
    return i


@task
def sync_customer(i: int) -> int:
    return i


@task
def export_report(i: int) -> int:
    return i


FUNCTIONS = (noop, send_welcome_email, make_thumbnail, sync_customer, export_report)
