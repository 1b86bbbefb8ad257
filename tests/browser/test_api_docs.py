"""Swagger UI in a real browser, under the Content-Security-Policy the server sends: every
file from this origin (drf-spectacular-sidecar), the operations listed, one tried out."""

from __future__ import annotations

import pytest

from tests.shared import log_in

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_swagger_ui_renders_and_calls_the_api_under_the_policy(
    page, live_server, django_user_model
) -> None:
    base = live_server.url
    user = django_user_model.objects.create_superuser("ops", "ops@example.com", "pw-ops-123")
    log_in(page, base, user)
    outside: list[str] = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(base) else None)
    response = page.goto(f"{base}/api/docs")
    assert (
        response is not None and "script-src 'self'" in response.headers["content-security-policy"]
    )
    page.locator(".opblock-summary-path", has_text="/api/actions").first.wait_for()
    assert page.locator(".opblock").count() >= 15  # every operation is listed
    # Try one out: the UI calls the API with the session (same origin, allowed by the policy).
    block = page.locator(".opblock", has=page.locator("[data-path='/api/actions']")).first
    block.locator(".opblock-summary").click()
    block.locator("button.try-out__btn").click()
    block.locator("button.execute").click()
    block.locator(".live-responses-table .response-col_status", has_text="200").wait_for()
    assert outside == []  # nothing fetched from anywhere else (no CDN, no validator badge)
