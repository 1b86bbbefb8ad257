"""Postgres restart during a batch: workers and beat reconnect by themselves, every run
completes, and no run stays running past its timeout plus the stall window."""

from __future__ import annotations

import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from tasks_app import services
from tasks_app.messaging import dispatch
from tasks_app.models import Run, RunStatus
from tests.processes import wait_until

from .conftest import STALL_SECONDS, Figures, StartProc, db_retry
from .helpers import settled, tally

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

RUNS, TIMEOUT = 60, 10


def cluster() -> list[str]:
    version = sorted(p.name for p in Path("/etc/postgresql").iterdir())[-1]
    return ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main"]


def postgres_ready() -> bool:
    return (
        subprocess.run(["pg_isready", "-h", "127.0.0.1", "-q"], check=False, timeout=10).returncode
        == 0
    )


def test_database_restart_workers_and_beat_reconnect(
    fault_worker: StartProc, fault_beat: StartProc, figures: Figures
) -> None:
    fault_worker(concurrency=2)
    fault_beat()
    task = services.task_create(
        id="through-restart",
        action="test-effect",
        payload={"seconds": 0.3},
        timeout_seconds=TIMEOUT,
        max_retries=3,
        retry_backoff_seconds=1,
    )
    for _ in range(RUNS):
        services.task_execute(task=task)
    wait_until(
        lambda: Run.objects.filter(task=task, status=RunStatus.COMPLETED).count() >= 10,
        timeout=60,
        message="the batch to be under way",
    )

    try:
        started = time.monotonic()
        subprocess.run([*cluster(), "restart"], check=True, timeout=120, capture_output=True)
        outage_s = round(time.monotonic() - started, 1)
    finally:
        if not postgres_ready():
            subprocess.run([*cluster(), "start"], check=False, timeout=120, capture_output=True)
        wait_until(
            postgres_ready, timeout=60, interval=0.5, message="Postgres to accept connections"
        )
    back_at = db_retry(timezone.now)

    # Beat still releases delayed runs (beyond the release horizon, so beat must publish it).
    later = db_retry(
        lambda: services.task_schedule_once(
            task=task, delay_seconds=services.horizon().total_seconds() + 1
        )
    )
    wait_until(
        lambda: db_retry(lambda: settled(task, RUNS + 1)),
        timeout=120,
        interval=0.5,
        message="every run to end",
    )
    result = tally(task)
    assert result.requested == RUNS + 1
    assert result.completed == RUNS + 1
    assert result.effects == RUNS + 1 and result.lost == 0
    assert result.duplicated == 0 and result.attempts_executed_twice == 0
    later.refresh_from_db()
    assert later.status == RunStatus.COMPLETED and later.started_at >= later.due_at
    bound = timedelta(seconds=TIMEOUT + dispatch.HARD_LIMIT_GRACE_SECONDS + STALL_SECONDS)
    longest = max(
        r.finished_at - r.started_at for r in Run.objects.filter(task=task).exclude(started_at=None)
    )
    assert longest <= bound
    first_after = (
        Run.objects.filter(task=task, finished_at__gt=back_at).order_by("finished_at").first()
    )
    assert first_after is not None
    figures(
        runs=RUNS + 1,
        restart_s=outage_s,
        lost=result.lost,
        duplicated=result.duplicated,
        retried=result.retried,
        longest_run_s=round(longest.total_seconds(), 1),
        first_completion_after_restart_s=round(
            (first_after.finished_at - back_at).total_seconds(), 1
        ),
    )
