"""Rate limits that hold under concurrency: 16 clients at once, over HTTP against the live
server, get no more than the limit accepted; refused answers (401) use up the rate too."""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.conf import settings
from django.test import override_settings

from tasks_app.services.tokens import token_create

pytestmark = pytest.mark.django_db(transaction=True)

CLIENTS = 16


def _hammer(url: str, requests_per_client: int, headers: dict[str, str]) -> tuple[Counter, float]:
    def client(_: int) -> list[int]:
        with httpx.Client(headers=headers, timeout=30) as http:
            return [http.get(url).status_code for _ in range(requests_per_client)]

    start = time.monotonic()
    with ThreadPoolExecutor(CLIENTS) as pool:
        codes = Counter(code for codes in pool.map(client, range(CLIENTS)) for code in codes)
    return codes, time.monotonic() - start


def _rates(**rates: str):
    rest = dict(settings.REST_FRAMEWORK)
    return override_settings(
        REST_FRAMEWORK={
            **rest,
            "DEFAULT_THROTTLE_RATES": {**rest["DEFAULT_THROTTLE_RATES"], **rates},
        }
    )


def test_sixteen_clients_get_at_most_1200_accepted_in_a_minute(live_server, operator) -> None:
    token = token_create(user=operator).token
    with _rates(user="1200/minute"):
        codes, elapsed = _hammer(
            f"{live_server.url}/api/actions", 95, {"Authorization": f"Token {token}"}
        )
    sent = CLIENTS * 95  # 1,520
    accepted = sent - codes[429]
    assert codes[429] + codes[200] == sent, codes
    assert elapsed < 60, f"took {elapsed:.0f} s: the minute ended before the test did"
    assert accepted == 1200, codes  # at most the limit, and the limit is not undercounted


def test_refused_answers_use_up_the_anonymous_rate(live_server) -> None:
    with _rates(anon="60/minute"):
        codes, elapsed = _hammer(f"{live_server.url}/api/tasks", 10, {})
    assert elapsed < 60
    assert codes == {401: 60, 429: 100}, codes
