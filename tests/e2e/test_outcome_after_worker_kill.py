"""kill -9 of the worker during 60 runs: every id handed back by ``execute`` answers
``completed`` in ``GET /api/runs/{id}`` (the runs cut off mid-action completed on a later
attempt, under another id), and ``manage.py tasks wait`` exits 0 on each."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.test import APIClient

from tasks_app import selectors
from tasks_app.models import Run, RunStatus
from tasks_app.services.tokens import token_create
from tests.processes import ROOT, Proc, process_env, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

RUNS = 60
SECONDS = 1.0  # each run's action sleeps this long
# A dead worker's runs are noticed in seconds (production defaults: 10 s / 60 s).
ENV = {"TASKS_HEARTBEAT_SECONDS": "0.5", "TASKS_STALL_SECONDS": "3"}


def operator_api() -> APIClient:
    user = get_user_model().objects.create_superuser("outcome-operator", password="unused")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user).token}")
    return client


def outcomes(ids: list[str]) -> dict[str, str | None]:
    runs = Run.objects.filter(pk__in=ids)
    return {str(r.id): selectors.run_outcome(run=r).status for r in runs}


def test_every_handed_out_id_answers_completed_after_a_worker_kill(
    worker_factory: Callable[..., Proc], beat_factory: Callable[..., Proc]
) -> None:
    api = operator_api()
    created = api.post(
        "/api/tasks",
        {"id": "sleeper", "action": "test-effect", "payload": {"seconds": SECONDS}},
        format="json",
    )
    assert created.status_code == 201, created.content
    beat_factory(**ENV)
    worker = worker_factory(concurrency=4, **ENV)
    ids = []
    for _ in range(RUNS):
        response = api.post("/api/tasks/sleeper/execute")
        assert response.status_code == 202, response.content
        ids.append(response.json()["id"])

    completed = Run.objects.filter(task_id="sleeper", status=RunStatus.COMPLETED)
    wait_until(lambda: completed.count() >= RUNS // 4, timeout=120, message="a quarter done")
    running = Run.objects.filter(task_id="sleeper", status=RunStatus.RUNNING)
    wait_until(running.exists, timeout=10, interval=0.01, message="a running run")
    killed = time.monotonic()
    worker.kill()  # SIGKILL to the main process and every pool child
    cut_off = [str(pk) for pk in running.values_list("id", flat=True)]
    assert cut_off, "the kill cut no run off mid-action"
    worker_factory(concurrency=4, **ENV)

    wait_until(
        lambda: all(s == RunStatus.COMPLETED for s in outcomes(ids).values()),
        timeout=180,
        interval=0.5,
        message="every handed-out id to answer completed",
    )
    recovered_seconds = round(time.monotonic() - killed, 1)

    # The REST API: each id handed back answers completed, its attempts listed.
    for run_id in ids:
        body = api.get(f"/api/runs/{run_id}").json()
        assert body["outcome"] == "completed", body
        assert body["attempts"][-1]["status"] == "completed"
        assert body["attempts"][0]["id"] == run_id
    # The ids cut off stay interrupted themselves; their outcome is the later attempt's.
    for run_id in cut_off:
        body = api.get(f"/api/runs/{run_id}").json()
        assert body["status"] == "interrupted" and body["outcome"] == "completed"
        first, *_, last = body["attempts"]
        # Noticed by the broker's redelivery or by the lease sweep, whichever comes first.
        assert first["error"].startswith("interrupted (1 of at most"), first["error"]
        assert "worker lost" in first["error"]
        assert last["id"] != run_id and last["worker"] != first["worker"]

    # ``tasks wait`` exits 0 on every id: in-process for all, the real command for a few.
    for run_id in ids:
        call_command("tasks", "wait", run_id, "--timeout", "30s", stdout=StringIO())
    for run_id in [*cut_off[:2], ids[-1]]:
        done = subprocess.run(
            [sys.executable, "manage.py", "tasks", "wait", run_id, "--timeout", "30s"],
            cwd=ROOT,
            env=process_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert re.search(r"^outcome +completed", done.stdout, re.M), done.stdout

    print(  # figures for the note
        f"\nruns={RUNS} cut_off_by_kill={len(cut_off)} "
        f"all_completed_seconds_after_kill={recovered_seconds}"
    )
