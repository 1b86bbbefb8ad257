"""A module no code imports: the allow-list tests prove a refused path never imports it (its
top-level code would run in the web process). It holds one ``@task`` function, so a path
the allow-list admits is checked, imported and run like any other."""

from __future__ import annotations

import django

if django.VERSION >= (6, 0):
    from django.tasks import task
else:
    from django_tasks import task


@task
def ping() -> str:
    return "pong"
