"""LOG_FORMAT=json: one JSON object per line, with the run's fields on lines about a run."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks_app import services
from tasks_app.observability.logs import JsonFormatter, run_log

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_run_log_lines_carry_run_task_attempt_and_lateness(caplog) -> None:
    run = services.task_execute(task=services.task_create(id="logged", action="noop"))
    run.lateness_ms = 7.5
    caplog.set_level(logging.INFO, logger="tasks_app.test")
    run_log(logging.getLogger("tasks_app.test"), run).info("run %s done", "x", extra={"rows": 3})
    line = JsonFormatter().format(caplog.records[-1])
    assert "\n" not in line
    data = json.loads(line)
    assert data["message"] == "run x done" and data["level"] == "INFO"
    assert (data["run_id"], data["task_id"], data["attempt"], data["lateness_ms"]) == (
        str(run.pk),
        "logged",
        1,
        7.5,
    )
    assert data["rows"] == 3


def test_exceptions_stay_on_one_line() -> None:
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    data = json.loads(JsonFormatter().format(record))
    assert "ValueError: bad" in data["exc"]


def test_log_format_json_setting_makes_every_line_json() -> None:
    env = {**os.environ, "LOG_FORMAT": "json", "DJANGO_SETTINGS_MODULE": "project.settings"}
    code = (
        "import django, logging; django.setup(); "
        "logging.getLogger('tasks_app.x').warning('hello %s', 'ops', extra={'run_id': 'r1'})"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = [json.loads(line) for line in out.stderr.splitlines() if line.strip()]
    assert lines and lines[-1]["message"] == "hello ops" and lines[-1]["run_id"] == "r1"
