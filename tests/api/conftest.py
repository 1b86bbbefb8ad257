from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.core.cache import cache
from rest_framework.test import APIClient

from tasks_app.services.tokens import token_create


def user_with(username: str, *codenames: str) -> User:
    user = User.objects.create_user(username=username, password="not-used-here")
    perms = Permission.objects.filter(content_type__app_label="tasks_app", codename__in=codenames)
    assert perms.count() == len(codenames), codenames
    user.user_permissions.set(perms)
    return user


ALL_PERMS = [
    f"{verb}_{model}" for verb in ("view", "add", "change", "delete") for model in ("task", "run")
]


@pytest.fixture(autouse=True)
def _fresh_throttle_counts() -> None:
    cache.clear()  # this session's own Redis db: throttle history from earlier runs must not count


@pytest.fixture
def operator(db: None) -> User:
    """A non-superuser holding every task and run permission."""
    return user_with("operator", *ALL_PERMS)


@pytest.fixture
def api(operator: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=operator).token}")
    return client


@pytest.fixture
def readonly_api(db: None) -> APIClient:
    user = user_with("viewer", "view_task", "view_run")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user).token}")
    return client
