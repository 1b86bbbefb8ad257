"""``POST /api/runs/{id}/cancel`` on a running run: 202, the run still ``running`` with its
request time (kept by a second request); refused without ``change_run`` (403) and on a
finished run (409), nothing written either way."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.models import Run, RunStatus
from tasks_app.worker import run_execution
from tests.shared import assert_error, queued_run

pytestmark = pytest.mark.django_db


def running_run() -> Run:
    task = services.task_create(id="long-job", action="noop")
    run = run_execution.run_claim(run_id=str(queued_run(task).id), worker="w@host")
    assert run is not None
    return run


def test_cancelling_a_running_run_asks_it_to_stop(api: APIClient) -> None:
    run = running_run()
    response = api.post(f"/api/runs/{run.id}/cancel")
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "running" and body["cancel_requested_at"] is not None
    again = api.post(f"/api/runs/{run.id}/cancel")
    assert again.status_code == 202
    assert again.json()["cancel_requested_at"] == body["cancel_requested_at"]
    shown = api.get(f"/api/runs/{run.id}").json()
    assert shown["cancel_requested_at"] == body["cancel_requested_at"]

    # Its worker records its end: cancelled, and a cancel after that is a conflict.
    run_execution.run_complete(run=Run.objects.select_related("task").get(pk=run.pk))
    assert Run.objects.get(pk=run.pk).status == RunStatus.CANCELLED
    body = assert_error(api.post(f"/api/runs/{run.id}/cancel"), 409)
    assert "is cancelled; only pending, queued or running runs can be cancelled" in body["error"]


def test_a_reader_cannot_cancel_a_running_run(readonly_api: APIClient) -> None:
    run = running_run()
    assert_error(readonly_api.post(f"/api/runs/{run.id}/cancel"), 403)
    assert Run.objects.get(pk=run.pk).cancel_requested_at is None
