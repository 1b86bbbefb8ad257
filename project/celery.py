"""The Celery application shared by the web, worker and beat processes."""

import os
from typing import Any

from celery import Celery
from celery.signals import celeryd_after_setup

from . import queues

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

# project.queues: every queue the product declares gets the type of TASKS_QUEUE_TYPE.
app = Celery("project", amqp="project.queues:AMQP")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@celeryd_after_setup.connect
def check_worker_queues(sender: str, instance: Any, **_: Any) -> None:
    """A worker whose queue exists with another type (or other arguments) stops at once with
    one line saying so, instead of a traceback from deep inside its consumer."""
    if not str(instance.app.conf.broker_url).startswith(("amqp://", "amqps://", "pyamqp://")):
        return
    try:
        queues.check(instance.app, list(instance.app.amqp.queues.consume_from))
    except queues.QueueMismatch as exc:
        raise SystemExit(f"worker {sender}: {exc}") from None
