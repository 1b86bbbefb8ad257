"""One client address for throttling, login lockout and /metrics, set by
TASKS_TRUSTED_PROXIES (DRF's NUM_PROXIES): X-Forwarded-For is believed only that far."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import RequestFactory, override_settings
from rest_framework.test import APIClient

from tasks_app.runtime.client_address import client_ip

pytestmark = pytest.mark.django_db


def rest(**changes: object) -> dict:
    return {**settings.REST_FRAMEWORK, **changes}


def test_a_new_forwarded_for_per_request_does_not_reset_the_anonymous_rate() -> None:
    rates = {"user": "3/minute", "anon": "3/minute"}
    with override_settings(REST_FRAMEWORK=rest(DEFAULT_THROTTLE_RATES=rates)):
        client = APIClient()
        codes = [
            client.get("/api/health", HTTP_X_FORWARDED_FOR=f"198.51.100.{n}").status_code
            for n in range(4)
        ]
    assert 429 not in codes[:3] and codes[3] == 429


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [
        (0, "203.0.113.9", "10.0.0.2"),  # no proxy trusted: the header is ignored
        (1, "6.6.6.6, 203.0.113.9", "203.0.113.9"),  # what the one proxy saw
        (2, "6.6.6.6, 203.0.113.9, 10.0.0.1", "203.0.113.9"),
        (1, "not-an-address", "10.0.0.2"),  # junk from a proxy: the peer's address
        (1, "", "10.0.0.2"),
    ],
)
def test_client_ip_counts_trusted_proxies_from_the_right(proxies, forwarded, expected) -> None:
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR=forwarded)
    with override_settings(REST_FRAMEWORK=rest(NUM_PROXIES=proxies)):
        assert client_ip(request) == expected


def test_metrics_networks_judge_the_client_behind_the_proxy(client, settings) -> None:
    settings.TASKS_METRICS_TOKEN = ""
    settings.TASKS_METRICS_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    outside = {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "203.0.113.9"}
    # A proxy on this machine forwards an outside caller: not the loopback network's caller.
    with override_settings(REST_FRAMEWORK=rest(NUM_PROXIES=1)):
        assert client.get("/metrics", **outside).status_code == 403
    # Without a trusted proxy the header is the caller's own word and changes nothing.
    assert client.get("/metrics", **outside).status_code == 200
