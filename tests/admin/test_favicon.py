"""The site has an icon: admin pages name it, and /favicon.ico (asked for by pages that name
none, such as the API docs) leads to it instead of answering 404."""

from __future__ import annotations

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_favicon_is_served(operator) -> None:
    index = operator.get(reverse("admin:index")).content.decode()
    assert 'rel="icon" href="/static/tasks_app/favicon.svg"' in index
    icon = operator.get("/favicon.ico", follow=True)
    assert icon.status_code == 200
    assert b"<svg" in b"".join(icon.streaming_content)
