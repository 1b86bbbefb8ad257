"""The leading beat deletes expired runs from its own thread while it keeps firing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tasks_app import services
from tasks_app.models import Run, RunStatus, Task, Trigger
from tests.processes import wait_until
from tests.stored_rows import run_set

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def finished(task: Task, age: timedelta, status: str = RunStatus.COMPLETED) -> Run:
    now = timezone.now()
    run = services.run_create(
        task=task, trigger=Trigger.API, due_at=now + timedelta(days=1), now=now
    )
    run_set(run.pk, status=status, due_at=now - age, finished_at=now - age)
    return run


def test_beat_prunes_in_batches_while_the_schedules_keep_firing(worker, beat_factory) -> None:
    history = services.task_create(id="history", action="noop")
    old = [finished(history, timedelta(days=31 + i)) for i in range(7)]
    old_failed = finished(history, timedelta(days=31), RunStatus.FAILED)  # kept 90 days
    recent = finished(history, timedelta(days=29))
    capped = services.task_create(id="capped", action="noop", keep_runs_count=2)
    capped_runs = [finished(capped, timedelta(hours=i)) for i in range(1, 5)]
    ticking = services.task_create(
        id="ticking", action="noop", schedule_type="interval", interval_seconds=1
    )

    started = timezone.now()
    beat_factory(TASKS_RETENTION_BATCH="3")

    gone = [r.pk for r in old] + [r.pk for r in capped_runs[2:]]
    wait_until(
        lambda: not Run.objects.filter(pk__in=gone).exists(),
        timeout=30,
        message="the expired runs to be deleted",
    )
    kept = {old_failed.pk, recent.pk, capped_runs[0].pk, capped_runs[1].pk}
    assert set(Run.objects.filter(pk__in=kept).values_list("pk", flat=True)) == kept
    # Beat kept firing meanwhile: the 1 s schedule's runs completed after beat started.
    wait_until(
        lambda: (
            Run.objects.filter(
                task=ticking, status=RunStatus.COMPLETED, due_at__gte=started
            ).count()
            >= 2
        ),
        timeout=20,
        message="the interval task to keep firing",
    )
