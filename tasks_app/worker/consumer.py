"""The worker's consumer (``CELERY_WORKER_CONSUMER``): Celery's, minus one reference cycle.

A message with an ETA becomes a request that waits on the worker's timer; Celery keeps the
timer entry on the request (``_eta_timer_entry``, to cancel it if the connection drops) and
the entry keeps the request (its arguments). After the entry fires, that cycle and everything
the request holds (message, headers, body) can only be freed by a full garbage collection,
which stops the worker's main process while runs come due (CHANGELOG.md has the figures).
Dropping the entry once it has fired lets reference counting free the request when its run
is done.
"""

from __future__ import annotations

from typing import Any

from celery.worker.consumer import Consumer as CeleryConsumer


class Consumer(CeleryConsumer):  # type: ignore[misc]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # `celery worker` reads worker_prefetch_multiplier while parsing its options, before
        # Django loads the app (and its Celery settings, tasks_app.celery_defaults): the
        # worker would reserve Celery's default 4 messages per process, and one whose pool
        # process froze would sit on runs that another worker could start.
        wanted = int(self.app.conf.worker_prefetch_multiplier)
        initial: int = getattr(self, "initial_prefetch_count", 0)
        given: int = getattr(self, "prefetch_multiplier", 1)
        if initial and wanted != given:
            self.initial_prefetch_count = max(initial // max(given, 1) * wanted, 1)
            self.prefetch_multiplier = wanted

    def apply_eta_task(self, task: Any) -> None:
        task._eta_timer_entry = None  # fired: nothing can cancel it any more
        super().apply_eta_task(task)
