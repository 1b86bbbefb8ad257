"""API tokens minted in the admin follow the one rule of ``tasks_app.services.tokens`` (the CLI's):
an expiry left blank is ``TASKS_API_TOKEN_DAYS`` from now, none is later than 366 days,
and the token shown once works; a user whose password is made unusable, changed, or who is
deactivated, loses the tokens, through the admin's user form and in code alike."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from knox.models import AuthToken
from rest_framework.test import APIClient

from tasks_app.services.tokens import token_create

pytestmark = pytest.mark.django_db


def api_with(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def reader(username: str, **fields: object) -> User:
    """A user who may list tasks (so a working token reads 200)."""
    user = User.objects.create_user(username, is_staff=True, **fields)
    user.user_permissions.set(Permission.objects.filter(codename="view_task"))
    return user


@pytest.fixture
def holder() -> User:
    return reader("holder", password="pw-Holder-2026")


def mint(operator: Client, holder: User, day: str = "", time: str = "") -> object:
    return operator.post(
        reverse("admin:knox_authtoken_add"), {"user": holder.pk, "expiry_0": day, "expiry_1": time}
    )


def test_a_token_minted_with_a_blank_expiry_expires_after_the_apps_setting(
    operator: Client, holder: User, settings
) -> None:
    settings.TASKS_API_TOKEN_DAYS = 7
    response = mint(operator, holder)
    assert response.status_code == 302
    row = AuthToken.objects.get(user=holder)
    assert row.expiry is not None, "a token that never expires"
    assert (
        timedelta(days=7) - timedelta(minutes=1) < row.expiry - timezone.now() <= timedelta(days=7)
    )
    shown = [str(m) for m in get_messages(response.wsgi_request)]
    token = next(m.split()[1] for m in shown if m.startswith("TOKEN "))
    assert api_with(token).get("/api/tasks").status_code == 200


@pytest.mark.parametrize(
    ("day", "said"),
    [("2125-01-01", "must be at most 366 days from now"), ("2001-01-01", "must be in the future")],
)
def test_an_expiry_beyond_the_rule_is_a_form_error_and_mints_nothing(
    operator: Client, holder: User, day: str, said: str
) -> None:
    response = mint(operator, holder, day, "00:00:00")
    assert response.status_code == 200, "the token was minted"
    errors = response.context["adminform"].form.errors
    assert any(said in m for m in errors["expiry"]), errors
    assert not AuthToken.objects.filter(user=holder).exists()


def test_an_inactive_user_gets_no_token(operator: Client, holder: User) -> None:
    holder.is_active = False
    holder.save()
    response = mint(operator, holder)
    assert response.status_code == 200
    assert "is not active" in str(response.context["adminform"].form.errors["user"])
    assert not AuthToken.objects.filter(user=holder).exists()


def test_disabling_password_authentication_in_the_admin_ends_the_tokens(
    operator: Client, holder: User
) -> None:
    token = token_create(user=holder).token
    assert api_with(token).get("/api/tasks").status_code == 200
    response = operator.post(
        reverse("admin:auth_user_password_change", args=[holder.pk]),
        {"usable_password": "false", "password1": "", "password2": "", "unset-password": "1"},
    )
    assert response.status_code == 302, response.context and response.context["form"].errors
    holder.refresh_from_db()
    assert not holder.has_usable_password()
    assert api_with(token).get("/api/tasks").status_code == 401
    assert not AuthToken.objects.filter(user=holder).exists()


def test_set_unusable_password_in_code_ends_the_tokens(holder: User) -> None:
    token = token_create(user=holder).token
    holder.set_unusable_password()
    holder.save()
    assert api_with(token).get("/api/tasks").status_code == 401


def test_an_account_that_never_had_a_password_keeps_its_tokens_across_saves() -> None:
    """An account for the API alone (no usable password from the start): its tokens stay
    when it is saved again (a login, a change of its e-mail)."""
    bot = reader("ci-bot")  # no password given: unusable from the start
    token = token_create(user=bot).token
    bot.email = "ci@example.com"
    bot.save()
    assert api_with(token).get("/api/tasks").status_code == 200
