"""A real ``celery beat`` started with another scheduler than the app's (``-S``, here
Celery's stock one) says so in its log at start, naming the setting (check
``tasks_app.W001`` says it to ``manage.py check`` from the settings alone)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.processes import process_env, spawn

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_beat_with_the_stock_scheduler_logs_a_warning_naming_the_setting(
    tmp_path: Path,
) -> None:
    args = [
        *(sys.executable, "-m", "celery", "-A", "project", "beat", "-l", "info"),
        *("-S", "celery.beat:PersistentScheduler"),
        *("-s", str(tmp_path / "celerybeat-schedule")),
        *("--pidfile", str(tmp_path / "beat.pid")),
    ]
    beat = spawn("beat", args, tmp_path, process_env())
    try:
        beat.wait_for_log("beat runs celery.beat:PersistentScheduler")
        [line] = [line for line in beat.log().splitlines() if "beat runs" in line]
        assert " WARNING tasks_app.checks " in line
        assert "CELERY_BEAT_SCHEDULER = 'tasks_app.beat.scheduler:TaskScheduler'" in line
    finally:
        beat.stop()
