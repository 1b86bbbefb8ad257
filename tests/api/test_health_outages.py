"""/api/health when a part is away or misconfigured: a wrong database role, a broker port
and a cache port nothing listens on (wrong URLs, so the shared services keep running). Each
time: 503 JSON naming the part; the anonymous answer holds no host, port, role or message,
authenticated staff get the reason."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from tasks_app.observability import health
from tasks_app.services.tokens import token_create

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
ROLE = "nosuchrole"


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _assert_anonymous_answer_is_bare(response, part: str, *secrets: str) -> dict:
    assert response.status_code == 503, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert part in body["down"] and part in body["error"], body
    assert body[part]["ok"] is False
    assert body[part]["error"] == health.PUBLIC_ERROR
    text = json.dumps(body)
    for secret in ("127.0.0.1", "localhost", *secrets):
        assert secret not in text, (secret, body)
    return body


def test_a_wrong_database_role_is_503_json_without_the_role_host_or_port() -> None:
    # The web process itself started with the wrong role: a subprocess, since this test's own
    # database connection must keep working.
    url = settings.DATABASES["default"]
    bad = f"postgres://{ROLE}@{url['HOST'] or '127.0.0.1'}:{url['PORT'] or 5432}/{url['NAME']}"
    script = (
        "import django, json; django.setup();"
        "from django.test import Client;"
        "r = Client().get('/api/health');"
        "print(json.dumps({'status': r.status_code, 'type': r['Content-Type'],"
        " 'body': r.content.decode()}))"
    )
    env = {
        **os.environ,
        "DATABASE_URL": bad,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DJANGO_ALLOWED_HOSTS": "testserver",
        "DJANGO_SECURE_SSL": "0",
    }
    done = subprocess.run(  # noqa: S603
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["status"] == 503, answer
    assert answer["type"] == "application/json"
    body = json.loads(answer["body"])
    assert "database" in body["down"] and body["database"]["error"] == health.PUBLIC_ERROR
    assert body["alarms"] is None
    for secret in (ROLE, "127.0.0.1", str(url["PORT"] or 5432), "role", "password"):
        assert secret not in answer["body"], (secret, body)


def test_a_broker_port_nothing_listens_on_is_503_json_details_for_staff_only() -> None:
    health.record_beat_tick(timezone.now())
    port = str(_closed_port())
    with override_settings(CELERY_BROKER_URL=f"amqp://guest:guest@127.0.0.1:{port}/h8"):
        anonymous = APIClient().get("/api/health")
        _assert_anonymous_answer_is_bare(anonymous, "broker", port, "guest")
        staff = User.objects.create_user("ops", is_staff=True)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=staff).token}")
        detailed = client.get("/api/health").json()
    assert detailed["broker"]["error"] not in ("", health.PUBLIC_ERROR), detailed
    assert "guest" not in detailed["broker"]["error"]  # credentials never, even for staff


def test_a_bad_token_on_health_is_answered_as_anonymous() -> None:
    port = str(_closed_port())
    with override_settings(CELERY_BROKER_URL=f"amqp://guest:guest@127.0.0.1:{port}/h8"):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION="Token not-a-token")
        _assert_anonymous_answer_is_bare(client.get("/api/health"), "broker", port)


def test_a_cache_port_nothing_listens_on_is_503_json_without_host_or_port() -> None:
    port = str(_closed_port())
    caches = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{port}/11",
        }
    }
    with override_settings(CACHES=caches):
        # The rate limit counts in the cache too: it lets the call through rather than fail.
        response = APIClient().get("/api/health")
    body = _assert_anonymous_answer_is_bare(response, "cache", port)
    assert body["database"]["ok"] is True and body["broker"]["ok"] is True
