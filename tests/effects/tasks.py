"""Celery tasks of a test app, for the ``celery`` action (found by Celery's autodiscovery)."""

from __future__ import annotations

import time
from typing import Any

from celery import shared_task


@shared_task(name="tests.effects.tasks.add")
def add(x: int, y: int, *, label: str = "sum") -> dict[str, Any]:
    return {label: x + y}


@shared_task(name="tests.effects.tasks.whoami", bind=True)
def whoami(self: Any) -> dict[str, Any]:
    return {"id": self.request.id, "retries": self.request.retries}


@shared_task(name="tests.effects.tasks.boom")
def boom(message: str) -> None:
    raise RuntimeError(message)


@shared_task(name="tests.effects.tasks.nap")
def nap(seconds: float) -> str:
    time.sleep(seconds)
    return "rested"


@shared_task(name="tests.effects.tasks.retry_me", bind=True, max_retries=5)
def retry_me(self: Any) -> None:
    raise self.retry(exc=RuntimeError("not yet"), countdown=0)


@shared_task(name="tests.effects.tasks.opaque")
def opaque() -> object:
    return object()
