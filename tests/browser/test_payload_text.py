"""A payload's text is shown as text on the task page: with the Content-Security-Policy
turned off in the browser (so it cannot be what stops them), an event handler or an image
stored in a payload by someone who may add tasks neither runs nor loads when a superuser
opens the task, and the text reaches the form unchanged."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.test import APIClient

from tasks_app.services.tokens import token_create

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
PASSWORD = "pw-Root-2026"
MESSAGE = (
    "<img src=/xss-probe-img onerror=\"window.__xss='img'\">"
    "<svg onload=\"window.__xss='svg'\"></svg>"
    "<script>window.__xss='script'</script> & <b>bold</b>"
)


def test_a_stored_event_handler_executes_nothing_on_the_task_page(browser, live_server) -> None:
    # Stored through the API by a user who may add tasks, nothing more.
    editor = User.objects.create_user("editor")
    editor.user_permissions.set(Permission.objects.filter(codename__in=["add_task", "view_task"]))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=editor).token}")
    created = api.post(
        "/api/tasks",
        {"id": "stored", "action": "echo", "payload": {"message": MESSAGE}},
        format="json",
    )
    assert created.status_code == 201, created.content

    User.objects.create_superuser("root", "root@example.com", PASSWORD)
    context = browser.new_context(bypass_csp=True)
    page = context.new_page()
    page.set_default_timeout(15_000)
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    base = live_server.url
    page.goto(f"{base}/admin/login/?next=/admin/tasks_app/task/stored/change/")
    page.fill("#id_username", "root")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    field = page.locator("#payload-form [name='payload_form[message]']")
    field.wait_for()
    page.wait_for_load_state("networkidle")
    try:
        assert page.evaluate("() => window.__xss") is None
        assert not [url for url in requested if "xss-probe" in url], requested
        assert field.input_value() == MESSAGE  # shown as the text it is, not trimmed of tags
        assert json.loads(page.locator("#id_payload").input_value()) == {"message": MESSAGE}
    finally:
        context.close()


def test_a_stored_secret_shows_as_set_and_a_save_keeps_it(browser, live_server) -> None:
    from tasks_app import services
    from tasks_app.models import Task

    secret = {"Authorization": "Bearer s3cr3t-from-the-form-test"}
    services.task_create(
        id="hook", action="http", payload={"url": "https://hooks.example.com/a", "headers": secret}
    )
    User.objects.create_superuser("root", "root@example.com", PASSWORD)
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15_000)
    base = live_server.url
    try:
        page.goto(f"{base}/admin/login/?next=/admin/tasks_app/task/hook/change/")
        page.fill("#id_username", "root")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        headers = page.locator("#payload-form [name='payload_form[headers]']")
        headers.wait_for()
        assert headers.input_value() == "set" and headers.is_disabled()
        assert "s3cr3t" not in page.content()
        page.locator("#payload-editor[data-state=valid]").wait_for()  # "set" checks as stored
        url = page.locator("#payload-form input[name='payload_form[url]']")
        url.fill("https://hooks.example.com/b")
        url.dispatch_event("change")
        page.click("input[name=_continue]")
        page.locator(".messagelist .success").wait_for()  # saved, no form error
        assert Task.objects.get().payload == {
            "url": "https://hooks.example.com/b",
            "headers": secret,
        }
        assert "s3cr3t" not in page.content()
        # A new value, given in Raw JSON, replaces it; the form then follows the new value.
        page.click("#payload-mode-raw")
        raw = json.loads(page.locator("#id_payload").input_value())
        assert raw["headers"] == "set"
        raw["headers"] = {"Authorization": "Bearer rotated"}
        page.fill("#id_payload", json.dumps(raw))
        page.click("#payload-mode-form")
        page.locator("#payload-form [name='payload_form[headers]']").wait_for(state="detached")
        assert json.loads(page.locator("#id_payload").input_value())["headers"] == {
            "Authorization": "Bearer rotated"
        }
        page.click("input[name=_continue]")
        page.locator(".messagelist .success").wait_for()
        assert Task.objects.get().payload["headers"] == {"Authorization": "Bearer rotated"}
    finally:
        context.close()
