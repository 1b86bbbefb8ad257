"""``@task`` functions the tests enqueue (on Django 6.0 from ``django.tasks``, on 5.2 from the
``django-tasks`` backport, as a project supporting both would write it)."""

from __future__ import annotations

import time

import django

if django.VERSION >= (6, 0):
    from django.tasks import task
else:
    from django_tasks import task


class QuotaExceeded(Exception):
    """An exception of the project's own, so its class path is not a builtin's."""


@task
def add(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b}


@task(priority=50, queue_name="default")
def greet(name: str, *, punctuation: str = "!") -> str:
    return f"hello {name}{punctuation}"


@task
def over_quota(user: str) -> None:
    raise QuotaExceeded(f"{user} is over quota")


@task
def exits() -> None:
    raise SystemExit(3)


@task
def returns_a_set() -> object:
    return {1, 2}


@task(takes_context=True)
def which_attempt(context: object) -> int:
    return int(context.attempt)  # type: ignore[attr-defined]


@task(takes_context=True)
def flaky(context: object, succeed_on: int) -> int:
    """Fails until its ``succeed_on``-th attempt."""
    attempt = int(context.attempt)  # type: ignore[attr-defined]
    if attempt < succeed_on:
        raise QuotaExceeded(f"attempt {attempt} of {succeed_on}")
    return attempt


@task(takes_context=True)
def until_cancelled(context: object, seconds: float) -> str:
    """Works in small steps for ``seconds``, stopping when its run is cancelled."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if context.cancel_requested():  # type: ignore[attr-defined]
            return "stopped at the cancel request"
        time.sleep(0.02)
    return "ran to the end"


def not_a_task() -> None:
    """A plain function: not a @task, refused as one."""


@task
def notify(user_id: int, message: str = "") -> str:
    """Deduplicated per user when its task's policy says ``unique_on="user_id"``."""
    return f"{user_id}: {message}"
