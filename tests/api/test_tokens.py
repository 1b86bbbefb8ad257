"""API tokens (django-rest-knox, ``tasks_app.services.tokens``), probed with users of graded
permissions: no page, answer or row holds a usable token; a token stops working after a
password change and after its expiry."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from knox.models import AuthToken
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.services.tokens import token_create

pytestmark = pytest.mark.django_db


def _with_token(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def _staff(username: str, *codenames: str) -> User:
    user = User.objects.create_user(username=username, password="pw-Viewer-2026", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    return user


@pytest.fixture
def root_token() -> str:
    root = User.objects.create_superuser("root", "root@example.com", "pw-Root-2026")
    return token_create(user=root).token


def test_a_view_only_operator_reads_no_usable_token_on_any_admin_page(root_token: str) -> None:
    services.task_create(id="t1", action="noop")
    viewer = _staff(
        "viewer", "view_task", "view_run", "view_authtoken", "view_user", "view_taskresult"
    )
    browser = Client()
    browser.force_login(viewer)
    pages = []
    for model, model_admin in admin.site._registry.items():
        if not model_admin.has_view_permission(browser_request(viewer)):
            continue
        meta = model._meta
        pages.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"))
    assert reverse("admin:knox_authtoken_changelist") in pages  # the tokens page is visible
    row = AuthToken.objects.get()
    pages.append(reverse("admin:knox_authtoken_change", args=[row.pk]))
    for page in pages:
        response = browser.get(page)
        assert response.status_code == 200, page
        html = response.content.decode()
        assert root_token not in html, page
    # What the pages do show (the digest in a link, the first characters) is not a token.
    for shown in (row.digest, row.token_key):
        assert _with_token(shown).get("/api/tasks").status_code == 401
    # The token text cannot be recovered from what is stored either.
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM knox_authtoken")
        stored = " ".join(str(value) for value in cursor.fetchone())
    assert root_token not in stored
    # DRF's clear-text token pages are gone.
    assert browser.get("/admin/authtoken/tokenproxy/").status_code == 404


def browser_request(user: User):  # the admin's permission hooks take a request
    from django.test import RequestFactory

    request = RequestFactory().get("/admin/")
    request.user = user
    return request


def test_only_a_superuser_may_mint_a_token_in_the_admin(root_token: str) -> None:
    clerk = _staff("clerk", "add_authtoken", "view_authtoken", "view_user")
    browser = Client()
    browser.force_login(clerk)
    root = User.objects.get(username="root")
    response = browser.post(
        reverse("admin:knox_authtoken_add"), {"user": root.pk, "expiry_0": "", "expiry_1": ""}
    )
    assert response.status_code == 403
    assert AuthToken.objects.filter(user=root).count() == 1


def test_the_old_token_is_refused_after_a_password_change(root_token: str) -> None:
    client = _with_token(root_token)
    assert client.get("/api/tasks").status_code == 200
    root = User.objects.get(username="root")
    root.set_password("pw-Root-changed-2026")
    root.save()
    response = client.get("/api/tasks")
    assert response.status_code == 401, response.content
    assert response.json()["error"]


def test_a_deactivated_users_tokens_stay_refused_after_it_is_activated_again(
    root_token: str,
) -> None:
    client = _with_token(root_token)
    root = User.objects.get(username="root")
    root.is_active = False
    root.save()
    assert client.get("/api/tasks").status_code == 401
    root.is_active = True
    root.save()
    assert client.get("/api/tasks").status_code == 401  # revoked, not suspended
    assert not AuthToken.objects.filter(user=root).exists()


def test_a_login_that_only_upgrades_the_password_hash_keeps_the_tokens(root_token: str) -> None:
    root = User.objects.get(username="root")
    root.check_password("pw-Root-2026")  # same password; a hash upgrade would save it again
    root.save()
    assert _with_token(root_token).get("/api/tasks").status_code == 200


def test_the_token_is_refused_after_its_expiry(root_token: str) -> None:
    client = _with_token(root_token)
    assert client.get("/api/tasks").status_code == 200
    AuthToken.objects.update(expiry=timezone.now() - timedelta(seconds=1))
    assert client.get("/api/tasks").status_code == 401


def test_every_token_has_an_expiry_even_when_none_is_asked_for(db: None) -> None:
    user = User.objects.create_user("alice")
    minted = token_create(user=user)
    assert minted.expiry is not None
    assert timedelta(days=29) < minted.expiry - timezone.now() <= timedelta(days=30)
    with pytest.raises(ValueError, match="--days must be more than 0 and at most 366"):
        token_create(user=user, days=400)


def test_the_default_token_life_is_the_apps_setting_whatever_knox_says(
    db: None, settings: Any
) -> None:
    settings.REST_KNOX = {"TOKEN_TTL": timedelta(hours=10)}  # knox's own default
    settings.TASKS_API_TOKEN_DAYS = 2
    minted = token_create(user=User.objects.create_user("bob"))
    assert (
        timedelta(days=2) - timedelta(minutes=1)
        < minted.expiry - timezone.now()
        <= timedelta(days=2)
    )


def test_the_command_prints_a_token_once_and_lists_only_its_first_characters(
    capsys: pytest.CaptureFixture[str],
) -> None:
    User.objects.create_user("alice")
    call_command("api_token", "create", "alice", "--days", "2")
    token = capsys.readouterr().out.strip()
    assert _with_token(token).get("/api/health").status_code in (200, 503)
    assert AuthToken.objects.get().expiry < timezone.now() + timedelta(days=2, minutes=1)
    call_command("api_token", "list", "alice")
    listed = capsys.readouterr().out
    assert token[:15] in listed and token not in listed
    call_command("api_token", "revoke", "alice")
    assert AuthToken.objects.count() == 0


def test_the_command_refuses_bad_input_naming_the_field(db: None) -> None:
    User.objects.create_user("alice")
    with pytest.raises(CommandError, match="--days must be more than 0"):
        call_command("api_token", "create", "alice", "--days", "0")
    with pytest.raises(CommandError, match="username: no user 'bob'"):
        call_command("api_token", "create", "bob")


@pytest.mark.parametrize("days", ["nan", "inf", "-1", "0", "367"])
def test_the_command_refuses_a_life_outside_the_rule(days: str) -> None:
    User.objects.create_user("carol", password="pw-Carol-2026")
    with pytest.raises(CommandError, match="--days must be more than 0 and at most 366"):
        call_command("api_token", "create", "carol", "--days", days)
    assert not AuthToken.objects.exists()
