"""Error answers stay small whatever was sent, and every method on the docs page is
answered (none is a 500)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def test_a_megabyte_payload_refused_is_not_echoed_back(api: APIClient) -> None:
    message = "x" * 1_000_001  # one over the echo action's limit, under the body limit
    response = api.post(
        "/api/tasks",
        {"id": "big", "action": "echo", "payload": {"message": message}},
        format="json",
    )
    assert response.status_code == 400
    assert len(response.content) < 5_000, len(response.content)
    body = response.json()
    assert "payload" in body["detail"] and "too long" in body["detail"]["payload"][0]


def test_a_huge_unknown_field_name_is_cut_in_the_error(api: APIClient) -> None:
    response = api.post("/api/tasks", {"id": "t", "action": "?" * 100_000}, format="json")
    assert response.status_code == 400
    assert len(response.content) < 5_000
    assert "action" in response.json()["detail"]


def test_options_on_the_docs_page_is_answered(operator) -> None:
    client = APIClient()
    client.force_login(operator)
    response = client.options("/api/docs")
    assert response.status_code == 200
    assert "GET" in response["Allow"]
    assert client.get("/api/docs").status_code == 200
