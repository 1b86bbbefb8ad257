"""The beat scheduler class: ``celery -A project beat`` with ``TaskScheduler``.

It keeps django-celery-beat's models and admin (and fires any PeriodicTask that is not owned
by a task the stock way), but owned entries are fired from the tasks table: every tick it

1. records a run for **every** recurring fire due within the release horizon, in batches,
   advancing each task's ``next_run_at`` in the same transaction
   (``services.schedule_fire_due``), and
2. releases every pending run due within the horizon to the broker with an ETA
   (``dispatch.release_due_runs``).

Both read an index on the due instant, so a schedule change made through the services is
seen on the next tick without a global "changed" row or a reload.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone
from django_celery_beat.schedulers import DatabaseScheduler

from . import dispatch, services

log = logging.getLogger(__name__)


class TaskScheduler(DatabaseScheduler):
    def enabled_models_qs(self) -> Any:
        # Entries owned by tasks are fired below, from the tasks table.
        return super().enabled_models_qs().filter(owner_task__isnull=True)

    def tick(self, *args: Any, **kwargs: Any) -> float:
        close_old_connections()
        now = timezone.now()
        try:
            services.schedule_fire_due(now=now, lookahead=dispatch.horizon())
            dispatch.release_due_runs(now=now)
        except Exception:  # a database blip must not kill beat; the next tick retries
            log.exception("beat tick failed; retrying next tick")
            close_old_connections()
        stock_wait = super().tick(*args, **kwargs)
        return min(stock_wait, settings.TASKS_BEAT_TICK_SECONDS)
