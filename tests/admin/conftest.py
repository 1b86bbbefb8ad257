from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _plain_static_storage(settings) -> None:
    """Unhashed static URLs, served from the apps' folders by the test server, so the tests
    need no ``collectstatic`` into the shared tree (the release step does that for real)."""
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture
def operator(django_user_model, client):
    user = django_user_model.objects.create_superuser("ops", "ops@example.com", "pw-ops-123")
    client.force_login(user)
    return client
