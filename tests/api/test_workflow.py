"""The seed workflow through the REST API with a token and a real worker."""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from rest_framework.test import APIClient

from tasks_app.models import Run, Task
from tests.processes import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LIFECYCLE = ["pending", "queued", "running", "completed"]


def watch_run(
    api: APIClient, run_id: str, first: str, timeout: float = 20
) -> tuple[list[str], dict]:
    """Poll the run through the API; the distinct statuses in the order they were seen."""
    seen = [first]
    deadline = time.monotonic() + timeout
    while True:
        body = api.get(f"/api/runs/{run_id}").json()
        if body["status"] != seen[-1]:
            seen.append(body["status"])
        if (
            body["status"] in ("completed", "failed", "expired", "cancelled")
            or time.monotonic() > deadline
        ):
            return seen, body
        time.sleep(0.02)


def test_seed_workflow(api: APIClient, worker) -> None:
    created = api.post(
        "/api/tasks",
        {"id": "my-task-1", "name": "My task", "action": "echo", "payload": {"message": "hello"}},
        format="json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["status"] == "created" and created.json()["run"] is None

    listed = api.get("/api/tasks").json()
    assert listed["count"] == 1 and [t["id"] for t in listed["results"]] == ["my-task-1"]
    assert api.get("/api/tasks", {"action": "echo", "status": "created"}).json()["count"] == 1
    assert api.get("/api/tasks", {"search": "my-task"}).json()["count"] == 1
    assert api.get("/api/tasks", {"status": "failed"}).json()["count"] == 0

    got = api.get("/api/tasks/my-task-1").json()
    assert (got["action"], got["payload"], got["next_run_at"]) == (
        "echo",
        {"message": "hello"},
        None,
    )

    scheduled = api.post("/api/tasks/my-task-1/schedule", {"delay_seconds": 2}, format="json")
    assert scheduled.status_code == 202, scheduled.content
    run = scheduled.json()
    assert run["trigger"] == "delay" and run["task"] == "my-task-1"
    assert api.get("/api/tasks/my-task-1").json()["next_run_at"] is not None

    seen, final = watch_run(api, run["id"], first=run["status"])
    print("statuses seen:", seen)
    assert final["status"] == "completed", final
    assert seen[0] == "pending" and "queued" in seen
    assert seen == [s for s in LIFECYCLE if s in seen]  # never out of order
    assert final["output"] == "hello" and final["worker"]
    due, started = (
        datetime.fromisoformat(final["due_at"]),
        datetime.fromisoformat(final["started_at"]),
    )
    assert started >= due  # never early
    assert datetime.fromisoformat(final["finished_at"]) >= started  # it did run
    assert api.get("/api/tasks/my-task-1").json()["status"] == "completed"

    renamed = api.patch("/api/tasks/my-task-1", {"name": "Renamed"}, format="json")
    assert renamed.status_code == 200 and renamed.json()["name"] == "Renamed"

    executed = api.post("/api/tasks/my-task-1/execute")
    assert executed.status_code == 202 and executed.json()["trigger"] == "api"
    _, now_run = watch_run(api, executed.json()["id"], first=executed.json()["status"])
    assert now_run["status"] == "completed"
    history = api.get("/api/tasks/my-task-1/runs").json()  # keyset pages: no count
    assert len(history["results"]) == 2 and history["next"] is None
    assert len(api.get("/api/runs", {"task": "my-task-1", "trigger": "api"}).json()["results"]) == 1

    assert api.delete("/api/tasks/my-task-1").status_code == 204
    assert api.get("/api/tasks/my-task-1").status_code == 404
    # Documented in docs/api.md: a task's runs are deleted with it (the audit trail stays).
    assert api.get(f"/api/runs/{run['id']}").status_code == 404
    assert not Task.objects.exists() and not Run.objects.exists()


def test_create_with_delay_schedules_a_reminder_in_one_call(api: APIClient, worker) -> None:
    response = api.post(
        "/api/tasks",
        {
            "id": "reminder-001",
            "action": "echo",
            "payload": {"message": "stand up"},
            "delay_seconds": 1,
            "expires_in_seconds": 60,
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["run"]["trigger"] == "delay" and body["next_run_at"] == body["run"]["due_at"]
    run = wait_until(
        lambda: Run.objects.filter(pk=body["run"]["id"], status="completed").first(),
        timeout=20,
        message="the reminder to run",
    )
    assert run.output == "stand up" and run.started_at >= run.due_at
