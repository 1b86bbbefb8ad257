"""Helpers that more than one test module uses, in one place (a test module never imports
another test module). Beside them: ``tests/processes.py`` (processes, environment, waiting),
``tests/web.py`` (the end-to-end tests' browser), ``tests/markdown.py``, ``tests/run_chains.py``,
``tests/stored_rows.py``, ``tests/plans.py``.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from tasks_app import services
from tasks_app.models import Run, RunStatus, Task, Trigger
from tests.processes import ROOT, process_env
from tests.stored_rows import run_set

# --- the admin ----------------------------------------------------------------------------

# A task id long enough to test how pages fit it (the browser tests' screenshots).
LONG_ID = "customer-invoices-nightly-export-to-accounting"


def form(**overrides: str) -> dict[str, str]:
    """The admin task form's fields as a browser posts them, with ``overrides``."""
    data = {
        "id": "reminder-001",
        "name": "Reminder",
        "description": "",
        "action": "echo",
        "payload": '{"message": "hi"}',
        "schedule_type": "none",
        "run_at_0": "",
        "run_at_1": "",
        "interval_seconds": "",
        "cron": "",
        "timezone": "UTC",
        "delay_seconds": "",
        "queue": settings.CELERY_TASK_DEFAULT_QUEUE,
        "priority": "5",
        "max_retries": "0",
        "retry_backoff_seconds": "10",
        "timeout_seconds": "",
        "expires_after_seconds": "",
        "jitter_seconds": "0",
        "overlap_policy": "allow",
        "catchup": "skip",
        "catchup_window_seconds": "3600",
        "start_at_0": "",
        "start_at_1": "",
        "end_at_0": "",
        "end_at_1": "",
        "max_runs": "",
        "pause_after_failures": "",
        "alert_after_seconds": "",
        "unique_on": "",
        "unique_for_seconds": "0",
    }
    data.update(overrides)
    return data


def log_in(page, base: str, user) -> None:
    """Sign ``user`` (password ``pw-ops-123``) in to the admin in a Playwright ``page``."""
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", "pw-ops-123")
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}/admin/")


# --- the API ------------------------------------------------------------------------------

# Static files without the manifest (pages render without collectstatic having run).
STATIC = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}


def assert_error(response, status: int, *fields: str) -> dict:
    """The API's JSON error shape, with ``status`` and a detail for each of ``fields``."""
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"error", "detail"}
    assert isinstance(body["error"], str) and body["error"] and "\n" not in body["error"]
    for field in fields:
        assert field in body["detail"] and body["detail"][field], body
    return body


# --- processes: manage.py and the CLI -----------------------------------------------------


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python manage.py *args`` in a clean environment (``env`` only), as a deployment runs it."""
    clean = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8", **env}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The real command line, as a script would run it, against the test database."""
    return subprocess.run(
        [sys.executable, "manage.py", "tasks", *args],
        cwd=ROOT,
        env=process_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# --- runs and metrics ---------------------------------------------------------------------


def queued_run(task: Task, *, trigger: str = Trigger.API, late: float = 0.0, **extra) -> Run:  # type: ignore[no-untyped-def]
    """A run as a worker finds it: ``queued``, due ``late`` seconds ago (stored far ahead so
    nothing is published, then moved by hand as the release would)."""
    now = timezone.now()
    run = services.run_create(
        task=task, trigger=trigger, due_at=now + timedelta(hours=1), now=now, **extra
    )
    run_set(run.pk, status=RunStatus.QUEUED, queued_at=now, due_at=now - timedelta(seconds=late))
    return Run.objects.get(pk=run.pk)


def scrape(client, **headers) -> dict[str, dict[tuple, float]]:
    """``/metrics`` as ``{sample name: {sorted labels: value}}``."""
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def runs_total(samples, status: str, action: str) -> float:
    """``tasks_runs_total`` for one status and action in a :func:`scrape`."""
    return samples.get("tasks_runs_total", {}).get((("action", action), ("status", status)), 0)
