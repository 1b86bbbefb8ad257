"""The OpenAPI document: valid, complete, served to logged-in users, and fuzzed."""

from __future__ import annotations

import time

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, Phase, given, settings
from jsonschema import Draft4Validator
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from schemathesis.specs.openapi.definitions import OPENAPI_30

pytestmark = pytest.mark.django_db


def schema(api: APIClient) -> dict:
    response = api.get("/api/schema", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def test_openapi_document_validates_and_covers_the_contract(api: APIClient) -> None:
    doc = schema(api)
    errors = [
        e.message for e in Draft4Validator(OPENAPI_30).iter_errors(doc)
    ]  # the OpenAPI 3.0 meta-schema
    assert errors == []
    paths = doc["paths"]
    for path, verbs in {
        "/api/tasks": {"get", "post"},
        "/api/tasks/{task_id}": {"get", "put", "patch", "delete"},
        "/api/tasks/{task_id}/execute": {"post"},
        "/api/tasks/{task_id}/schedule": {"post"},
        "/api/tasks/{task_id}/pause": {"post"},
        "/api/tasks/{task_id}/resume": {"post"},
        "/api/tasks/{task_id}/backfill": {"post"},
        "/api/tasks/{task_id}/runs": {"get"},
        "/api/runs": {"get"},
        "/api/runs/{run_id}": {"get"},
        "/api/runs/{run_id}/cancel": {"post"},
        "/api/runs/{run_id}/retry": {"post"},
        "/api/actions": {"get"},
        "/api/health": {"get"},
    }.items():
        assert verbs <= set(paths[path]), path
    create = paths["/api/tasks"]["post"]
    assert {"201", "400", "401", "403", "409", "413"} <= set(create["responses"])
    assert create["responses"]["409"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/Error"
    )
    assert paths["/api/runs/{run_id}/cancel"]["post"]["responses"]["409"]
    assert "delay_seconds" in doc["components"]["schemas"]["TaskCreateRequest"]["properties"]


STATIC = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}


def test_swagger_ui_is_served_without_a_cdn(api: APIClient) -> None:
    # Plain static storage: this test must not depend on a prior `collectstatic` (make test
    # runs one; the manifest storage then serves the same sidecar files).
    with override_settings(STORAGES=STATIC):
        response = api.get("/api/docs")
    assert response.status_code == 200
    page = response.content.decode()
    assert "swagger-ui" in page and "/api/schema" in page
    assert "cdn.jsdelivr.net" not in page and "unpkg.com" not in page


def make_probe(
    operation,
    headers: dict,
    budget: float,
    failures: list[str],
    live_server_url: str,
    seen: list[int],
):
    @settings(
        max_examples=25,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(case=operation.as_strategy())
    def probe(case) -> None:
        if time.monotonic() > budget:
            return
        response = case.call(base_url=live_server_url, headers=headers, timeout=30)
        seen.append(response.status_code)
        if response.status_code >= 500:
            failures.append(
                f"{case.method} {case.formatted_path} -> {response.status_code}: "
                f"{case.as_curl_command(headers, base_url=live_server_url)}\n{response.text[:500]}"
            )

    return probe


@pytest.mark.django_db(transaction=True)
def test_fuzzing_the_live_server_finds_no_5xx(live_server, operator) -> None:
    import schemathesis

    token = Token.objects.create(user=operator).key
    headers = {"Authorization": f"Token {token}"}
    spec = schemathesis.openapi.from_url(
        f"{live_server.url}/api/schema?format=json", headers=headers
    )
    failures: list[str] = []
    seen: list[int] = []
    budget = time.monotonic() + 150  # bound the whole run in time as well as examples
    checked = 0
    for result in spec.get_all_operations():
        operation = result.ok()
        if operation.path == "/api/health":
            continue  # public, and each call waits for a worker ping: covered in test_health

        probe = make_probe(operation, headers, budget, failures, live_server.url, seen)
        probe()
        checked += 1
    assert checked >= 15
    print(f"{len(seen)} requests:", {code: seen.count(code) for code in sorted(set(seen))})
    assert len(seen) >= 100 and any(200 <= code < 300 for code in seen)
    assert failures == [], "\n\n".join(failures[:5])
