"""Authentication, permissions and throttling on every route."""

from __future__ import annotations

import re
import uuid

import pytest
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.models import Run, Task
from tests.shared import STATIC

pytestmark = pytest.mark.django_db

PUBLIC = {"/api/health"}
# Pages for people rather than the API's contract: the session login (and logout) page, and
# Swagger UI, which sends an anonymous visitor to that login and back (tested below).
FOR_PEOPLE = {"/api/auth/login/", "/api/auth/logout/", "/api/docs"}
# A redirect to a static file (the admin's icon), public like every static file.
STATIC_FILES = {"/favicon.ico"}


def all_paths(patterns: list, prefix: str = "") -> list[str]:
    """Every route of the URLconf with sample values for its converters."""
    out: list[str] = []
    for entry in patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            out += all_paths(entry.url_patterns, route)
        elif isinstance(entry, URLPattern):
            if entry.callback.__name__ == "unmatched":
                continue  # the catch-all (trailing-slash redirect or JSON 404): tested below
            route = route.replace("<uuid:run_id>", str(uuid.uuid4()))
            route = re.sub(r"<(str:)?[a-z_]+>", "some-id", route)
            out.append("/" + route)
    return out


def api_paths() -> list[str]:
    # The admin has its own login (it redirects anonymous users to it) and is not part of
    # the API's contract; everything else must be covered, including routes added later.
    return [p for p in all_paths(get_resolver().url_patterns) if not p.startswith("/admin/")]


def test_the_urlconf_enumeration_sees_the_api() -> None:
    paths = api_paths()
    assert "/api/tasks" in paths and "/api/runs/dead" in paths and "/api/docs" in paths
    assert PUBLIC <= set(paths)
    assert len(paths) >= 18


METHODS = ["get", "post", "put", "patch", "delete"]
CASES = [
    (m, p)
    for p in api_paths()
    if p not in PUBLIC | FOR_PEOPLE | STATIC_FILES
    for m in (METHODS if p.startswith("/api/") else ["get"])
]


@pytest.mark.parametrize(("method", "path"), CASES)
def test_every_route_but_health_refuses_anonymous_with_401(path: str, method: str) -> None:
    # An anonymous caller from outside (not loopback: /metrics trusts loopback scrapers).
    # With TASKS_METRICS_TOKEN set (as in production) /metrics also answers 401; without a
    # token it answers 403 ("not from this address"), by its own design.
    client = APIClient(REMOTE_ADDR="203.0.113.9")
    with override_settings(TASKS_METRICS_TOKEN="configured-in-production"):
        response = getattr(client, method)(path, {}, format="json")
    assert response.status_code == 401, (method, path, response.status_code)
    if path.startswith("/api/") and response["Content-Type"].startswith("application/json"):
        assert response.json()["error"]


def test_anonymous_docs_lead_to_the_login_page_and_back(operator) -> None:
    client = Client()
    response = client.get("/api/docs")
    assert response.status_code == 302
    login_url = response["Location"]
    assert login_url == "/api/auth/login/?next=/api/docs"

    page = client.get(login_url)
    assert page.status_code == 200 and b'name="password"' in page.content
    operator.set_password("pw-for-the-docs")
    operator.save()
    back = client.post(
        login_url, {"username": "operator", "password": "pw-for-the-docs", "next": "/api/docs"}
    )
    assert (back.status_code, back["Location"]) == (302, "/api/docs")
    with override_settings(STORAGES=STATIC):
        docs = client.get("/api/docs")
    assert docs.status_code == 200 and b"swagger-ui" in docs.content
    # The schema the page loads answers the logged-in session too.
    assert client.get("/api/schema", {"format": "json"}).json()["openapi"].startswith("3.")


def test_machines_still_get_401_from_the_schema_and_docs_with_a_bad_token() -> None:
    assert APIClient().get("/api/schema").status_code == 401
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert client.get("/api/docs").status_code == 401


@pytest.mark.parametrize(
    ("path", "target"),
    [
        ("/api/docs/", "/api/docs"),
        ("/api/tasks/", "/api/tasks"),
        ("/api/tasks/?page=2", "/api/tasks?page=2"),
        ("/api/tasks/t-1/runs/", "/api/tasks/t-1/runs"),
        ("/api/runs/dead/", "/api/runs/dead"),
    ],
)
def test_trailing_slash_variants_redirect_keeping_the_method(path: str, target: str) -> None:
    for method in ("get", "post"):
        response = getattr(Client(), method)(path)
        assert (response.status_code, response["Location"]) == (308, target), (method, path)


def test_a_trailing_slash_redirect_reaches_the_view(api: APIClient) -> None:
    response = api.post(
        "/api/tasks/", {"id": "slashed", "action": "noop"}, format="json", follow=True
    )
    assert response.status_code == 201 and response.json()["id"] == "slashed"


def test_unknown_api_paths_are_a_json_404() -> None:
    for path in ("/api/nope", "/api/nope/", "/api/", "/api/tasks/a/b/c"):
        response = APIClient().get(path)
        assert response.status_code == 404, path
        assert response["Content-Type"] == "application/json"
        assert response.json()["error"].startswith("No API route")


def test_a_bad_token_is_401_with_the_error_shape() -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    response = client.get("/api/tasks")
    assert response.status_code == 401
    assert response.json() == {"error": "Invalid token.", "detail": {}}
    assert response["WWW-Authenticate"] == "Token"


def test_health_needs_no_login(db: None) -> None:
    assert APIClient().get("/api/health").status_code in (200, 503)


def test_readonly_operator_can_look_but_not_change(readonly_api: APIClient) -> None:
    task = services.task_create(id="looked-at", action="noop")
    run = services.task_execute(task=task)
    assert readonly_api.get("/api/tasks").json()["count"] == 1
    assert readonly_api.get("/api/tasks/looked-at").status_code == 200
    assert readonly_api.get(f"/api/runs/{run.id}").status_code == 200
    assert readonly_api.get("/api/actions").status_code == 200

    writes = [
        ("post", "/api/tasks", {"id": "new", "action": "noop"}),
        ("patch", "/api/tasks/looked-at", {"name": "x"}),
        ("put", "/api/tasks/looked-at", {"action": "noop"}),
        ("delete", "/api/tasks/looked-at", None),
        ("post", "/api/tasks/looked-at/execute", None),
        ("post", "/api/tasks/looked-at/schedule", {"delay_seconds": 60}),
        ("post", "/api/tasks/looked-at/pause", {"note": "x"}),
        ("post", "/api/tasks/looked-at/resume", None),
        (
            "post",
            "/api/tasks/looked-at/backfill",
            {"start": "2025-01-01T00:00:00Z", "end": "2025-01-02T00:00:00Z"},
        ),
        ("post", f"/api/runs/{run.id}/cancel", None),
        ("post", f"/api/runs/{run.id}/retry", None),
    ]
    for method, path, body in writes:
        response = getattr(readonly_api, method)(path, body, format="json")
        assert response.status_code == 403, (method, path, response.content)
        assert response.json()["error"].startswith("You do not have permission")
    assert list(Task.objects.values_list("id", "name", "state__status")) == [
        ("looked-at", "", "pending")
    ]
    assert Run.objects.count() == 1


def test_user_without_view_permission_cannot_read(db: None) -> None:
    from tests.api.conftest import user_with

    client = APIClient()
    client.force_authenticate(user_with("runs-only", "view_run"))
    assert client.get("/api/tasks").status_code == 403
    assert client.get("/api/runs").status_code == 200


def test_session_login_works_too(operator) -> None:
    client = APIClient()
    client.force_login(operator)
    assert client.get("/api/tasks").status_code == 200


def test_throttling_answers_429_once_the_rate_is_spent(api: APIClient) -> None:
    rates = {"user": "3/minute", "anon": "3/minute"}
    with override_settings(REST_FRAMEWORK={**_rest(), "DEFAULT_THROTTLE_RATES": rates}):
        codes = [api.get("/api/tasks").status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        response = api.get("/api/tasks")
        assert response.json()["error"].startswith("Request was throttled")
        assert int(response["Retry-After"]) > 0


def _rest() -> dict:
    from django.conf import settings

    return dict(settings.REST_FRAMEWORK)
