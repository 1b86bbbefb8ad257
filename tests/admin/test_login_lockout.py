"""Login lockout (django-axes): failed password logins lock a (username, address) pair out,
at the admin login and at the API's session login alike."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db

LOGINS = {"admin": "/admin/login/", "api": "/api/auth/login/"}
PASSWORD = "the-right-password-42"


@pytest.fixture
def admin_user(django_user_model) -> User:
    return django_user_model.objects.create_superuser("boss", "boss@example.com", PASSWORD)


def attempt(path: str, password: str, address: str = "127.0.0.1", **headers: str) -> int:
    client = Client(REMOTE_ADDR=address, **headers)
    response = client.post(path, {"username": "boss", "password": password, "next": "/admin/"})
    if response.status_code == 302:  # logged in: the session really is authenticated
        assert client.get("/admin/").status_code == 200
    return response.status_code


@pytest.mark.parametrize("where", sorted(LOGINS))
def test_twenty_failed_logins_lock_the_account_at_that_address(admin_user, where) -> None:
    from django.conf import settings

    limit = settings.AXES_FAILURE_LIMIT
    path = LOGINS[where]
    codes = [attempt(path, f"guess-{n}") for n in range(20)]
    # A wrong password is the login form again (200) until the limit; from the limit on every
    # answer is 429, whatever the password.
    assert codes == [200] * (limit - 1) + [429] * (20 - limit + 1)
    assert attempt(path, PASSWORD) == 429  # the right password does not get in either
    # Another address is another pair: the real operator elsewhere is not locked out.
    assert attempt(path, PASSWORD, address="10.1.2.3") == 302
    # The operator's way out before the cool-off ends.
    call_command("axes_reset", verbosity=0)
    assert attempt(path, PASSWORD) == 302


def test_a_forged_forwarded_for_does_not_escape_the_lockout(admin_user) -> None:
    # No trusted proxy (the default): X-Forwarded-For is the client's own word and ignored.
    codes = [
        attempt("/admin/login/", "wrong", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}") for n in range(12)
    ]
    assert codes[-1] == 429
    assert attempt("/admin/login/", PASSWORD, HTTP_X_FORWARDED_FOR="198.51.100.7") == 429


def test_behind_one_trusted_proxy_the_forwarded_address_is_the_client(admin_user) -> None:
    from django.conf import settings

    rest = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    with override_settings(REST_FRAMEWORK=rest):
        # The proxy (10.0.0.2) appends the address it saw; whatever the client wrote before
        # that is not believed.
        codes = [
            attempt(
                "/admin/login/",
                "wrong",
                address="10.0.0.2",
                HTTP_X_FORWARDED_FOR=f"1.2.3.{n}, 203.0.113.9",
            )
            for n in range(12)
        ]
        assert codes[-1] == 429
        assert (
            attempt("/admin/login/", PASSWORD, "10.0.0.2", HTTP_X_FORWARDED_FOR="203.0.113.9")
            == 429
        )
        # Another client behind the same proxy is another address.
        assert (
            attempt("/admin/login/", PASSWORD, "10.0.0.2", HTTP_X_FORWARDED_FOR="203.0.113.10")
            == 302
        )
