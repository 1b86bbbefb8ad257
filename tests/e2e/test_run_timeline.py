"""One timeline per run: created <= queued <= started <= finished, for runs made by a real
beat and a real worker, as the REST API shows them and as the database holds them. Each step
is stamped by the process that records it, on its clock, when it records it; a fire is
created and queued at beat's tick."""

from __future__ import annotations

from datetime import datetime

import pytest
from django.contrib.auth.models import User
from django.utils.dateparse import parse_datetime
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.models import Run, RunStatus, Trigger
from tasks_app.services.tokens import token_create
from tests.processes import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

STEPS = ("created_at", "queued_at", "started_at", "finished_at")


def timeline(values: dict[str, datetime | None]) -> list[tuple[str, datetime]]:
    return [(step, value) for step in STEPS if (value := values[step]) is not None]


def out_of_order(steps: list[tuple[str, datetime]]) -> list[str]:
    return [
        f"{a} {t1.isoformat()} after {b} {t2.isoformat()}"
        for (a, t1), (b, t2) in zip(steps, steps[1:], strict=False)
        if t1 > t2
    ]


def test_every_run_of_a_real_worker_and_beat_keeps_its_order(worker, beat_factory) -> None:
    fired = services.task_create(
        id="timeline-every-1s", action="noop", schedule_type="interval", interval_seconds=1
    )
    on_demand = services.task_create(id="timeline-now", action="echo", payload={"message": "hi"})
    beat_factory()
    asked = [services.task_execute(task=on_demand) for _ in range(3)]
    delayed = services.task_schedule_once(task=on_demand, delay_seconds=2)
    done = Run.objects.filter(status=RunStatus.COMPLETED)
    wait_until(
        lambda: (
            done.filter(task=fired).count() >= 4
            and done.filter(id__in=[r.id for r in [*asked, delayed]]).count() == 4
        ),
        timeout=45,
        message="four fires, three runs now and a delayed run to complete",
    )
    runs = list(done.filter(task__in=[fired, on_demand]))
    assert {r.trigger for r in runs} >= {Trigger.SCHEDULE, Trigger.MANUAL, Trigger.DELAY}

    admin = User.objects.create_superuser("timeline-admin", password="not-used-here")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=admin).token}")
    problems = []
    for run in runs:
        stored = timeline({step: getattr(run, step) for step in STEPS})
        shown = api.get(f"/api/runs/{run.id}").json()
        from_api = timeline({step: parse_datetime(shown[step] or "") for step in STEPS})
        assert [s for s, _ in stored] == list(STEPS), run.id  # every step recorded
        assert from_api == stored
        problems += [f"{run.trigger} run {run.id}: {p}" for p in out_of_order(stored)]
    assert problems == []
    # An on-demand task whose runs have all completed says so (not "pending").
    on_demand.state.refresh_from_db()
    assert on_demand.state.status == "completed"
