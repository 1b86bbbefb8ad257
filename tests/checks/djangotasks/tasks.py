from __future__ import annotations

import django

if django.VERSION >= (6, 0):
    from django.tasks import task  # type: ignore[import-not-found,unused-ignore]
else:
    from django_tasks import task


@task
def send_welcome_email(user_id: int) -> str:
    return f"welcome {user_id}"
