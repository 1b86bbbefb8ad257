"""Celery entry points: fetch by id, call a service. No rules live here."""

from __future__ import annotations

from celery import Task as CeleryTask
from celery import shared_task

from . import services
from .models import Task, Trigger


@shared_task(name="tasks_app.execute_run", bind=True, acks_late=True)
def execute_run(self: CeleryTask, run_id: str) -> dict[str, object] | None:
    """Execute one run. The message id is the run id; duplicates are ignored by the claim."""
    run = services.run_execute(run_id=run_id, worker=self.request.hostname or "")
    if run is None:
        return None
    return {"run_id": str(run.id), "status": run.status}


@shared_task(name=services.EXECUTE_TASK)
def execute_task(task_id: str) -> str | None:
    """'Run now' for a task, as sent by django-celery-beat's admin action on its entry."""
    task = Task.objects.filter(pk=task_id).first()
    if task is None:
        return None
    return str(services.task_execute(task=task, trigger=Trigger.MANUAL).id)
