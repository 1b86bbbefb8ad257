"""The queues through the API: the list with each queue's pause and waiting runs, pause and
resume, the pause's own permissions, bad input as a 400 naming the field with nothing written,
and the routes in the OpenAPI document."""

from __future__ import annotations

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.models import QueuePause, Run, RunStatus
from tasks_app.services.tokens import token_create
from tasks_app.vocabulary import validation
from tests.api.conftest import user_with
from tests.shared import assert_error

pytestmark = pytest.mark.django_db

QUEUE_PERMS = ("view_queuepause", "add_queuepause", "delete_queuepause")


def client_of(username: str, *codenames: str) -> APIClient:
    client = APIClient()
    user = user_with(username, *codenames)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user).token}")
    return client


@pytest.fixture
def queue() -> str:
    return str(settings.CELERY_TASK_DEFAULT_QUEUE)


@pytest.fixture
def queues_api() -> APIClient:
    return client_of("queue-operator", *QUEUE_PERMS)


def test_pause_list_and_resume_a_queue(queues_api: APIClient, queue: str) -> None:
    task = services.task_create(id="waits", action="noop")
    listed = queues_api.get("/api/queues")
    assert listed.status_code == 200, listed.content
    rows = {row["name"]: row for row in listed.json()["results"]}
    assert set(rows) == set(validation.configured_queues())
    assert rows[queue] == {
        "name": queue,
        "paused": False,
        "paused_at": None,
        "paused_by": "",
        "note": "",
        "waiting_runs": 0,
    }

    paused = queues_api.post(f"/api/queues/{queue}/pause", {"note": "billing down"}, format="json")
    assert paused.status_code == 200, paused.content
    body = paused.json()
    assert (body["name"], body["paused"], body["paused_by"], body["note"]) == (
        queue,
        True,
        "queue-operator",
        "billing down",
    )
    assert body["paused_at"] is not None

    run = services.task_execute(task=task)
    row = next(r for r in queues_api.get("/api/queues").json()["results"] if r["name"] == queue)
    assert (row["paused"], row["waiting_runs"]) == (True, 1)
    assert Run.objects.get(pk=run.pk).status == RunStatus.PENDING

    resumed = queues_api.post(f"/api/queues/{queue}/resume")
    assert resumed.status_code == 200, resumed.content
    assert (resumed.json()["paused"], resumed.json()["paused_at"]) == (False, None)
    assert not QueuePause.objects.exists()


def test_a_pause_without_a_body_has_no_note(queues_api: APIClient, queue: str) -> None:
    response = queues_api.post(f"/api/queues/{queue}/pause")
    assert response.status_code == 200, response.content
    assert QueuePause.objects.get(queue=queue).note == ""


@pytest.mark.parametrize(
    ("path", "body", "field", "words"),
    [
        ("/api/queues/no-such-queue/pause", None, "queue", "is not a configured queue"),
        ("/api/queues/no-such-queue/resume", None, "queue", "is not a configured queue"),
        ("/api/queues/amq.gen/pause", None, "queue", "amq."),
        ("/api/queues/{queue}/pause", {"note": "x" * 2001}, "note", "2,000"),
        ("/api/queues/{queue}/pause", {"note": 5}, "note", "string"),
        ("/api/queues/{queue}/pause", {"reason": "down"}, "reason", ""),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_nothing_is_written(
    queues_api: APIClient, queue: str, path: str, body: object, field: str, words: str
) -> None:
    response = queues_api.post(path.format(queue=queue), body, format="json")
    detail = assert_error(response, 400, field)["detail"]
    assert words in " ".join(map(str, detail[field])), detail
    assert not QueuePause.objects.exists()


def test_the_pause_needs_its_own_permissions_not_the_tasks(queue: str) -> None:
    editor = client_of("editor", "view_task", "change_task", "view_run", "change_run")
    for path in ("/api/queues", f"/api/queues/{queue}/pause"):
        method = editor.get if path.endswith("queues") else editor.post
        body = assert_error(method(path), 403)
        assert "view_queuepause" in body["error"], body
    assert not QueuePause.objects.exists()

    pauser = client_of("pauser", "view_queuepause", "add_queuepause")
    assert pauser.post(f"/api/queues/{queue}/pause").status_code == 200
    body = assert_error(pauser.post(f"/api/queues/{queue}/resume"), 403)
    assert "delete_queuepause" in body["error"]
    assert QueuePause.objects.filter(queue=queue).exists()


def test_an_anonymous_call_is_a_401(queue: str) -> None:
    assert APIClient().post(f"/api/queues/{queue}/pause").status_code == 401
    assert not QueuePause.objects.exists()


def test_the_routes_are_in_the_openapi_document(queues_api: APIClient) -> None:
    client = client_of("reader", "view_task")
    schema = client.get("/api/schema?format=json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert {"/api/queues", "/api/queues/{queue}/pause", "/api/queues/{queue}/resume"} <= set(paths)
    pause = paths["/api/queues/{queue}/pause"]["post"]
    assert {"200", "400", "403"} <= set(pause["responses"])
    note = schema.json()["components"]["schemas"]["QueuePauseRequest"]["properties"]["note"]
    assert note["maxLength"] == validation.PAUSE_NOTE_MAX_LENGTH
