"""The ``http`` action: webhook delivery, retries by status, and SSRF refusals.

Unit tests call the real action code in-process against a real local listener; the
end-to-end tests go through a real worker. Refused destinations must fail *before* any
connection attempt: a spy on ``socket.connect`` proves it, and the listener counts accepts.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import threading

import pytest
from django.core.exceptions import ValidationError

from tasks_app import actions, services
from tasks_app.actions.http import http_request, refusal_reason
from tasks_app.models import Run, RunStatus
from tests.actions.conftest import LOOPBACK_ONLY, Listener
from tests.actions.helpers import context, finished
from tests.processes import wait_until


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every address this process tries to connect a socket to."""
    seen: list[object] = []
    real = socket.socket.connect

    def spy(self: socket.socket, address: object) -> None:
        seen.append(address)
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", spy)
    return seen


@pytest.fixture
def loopback_allowed(settings: object) -> None:
    settings.TASKS_HTTP_ALLOWED_NETWORKS = [LOOPBACK_ONLY]  # type: ignore[attr-defined]


@pytest.fixture
def nothing_allowed(settings: object) -> None:
    settings.TASKS_HTTP_ALLOWED_NETWORKS = []  # type: ignore[attr-defined]


def test_webhook_delivers_json_body_and_headers(listener: Listener, loopback_allowed: None) -> None:
    listener.reply(200, '{"accepted": true}', {"Content-Type": "application/json"})
    ctx = context()
    outcome = http_request(
        {
            "url": listener.url("/hooks/orders?x=1"),
            "json": {"order": 42, "items": ["a", "b"]},
            "headers": {"X-Signature": "abc123"},
        },
        ctx,
    )
    assert isinstance(outcome, actions.Outcome)
    assert outcome.output == '{"accepted": true}'
    assert outcome.result["status"] == 200
    assert outcome.result["headers"]["content-type"] == "application/json"
    [request] = listener.requests
    assert request.method == "POST"  # the default
    assert request.path == "/hooks/orders?x=1"
    assert json.loads(request.body) == {"order": 42, "items": ["a", "b"]}
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["X-Signature"] == "abc123"
    assert request.headers["X-Task-Run-Id"] == ctx.run_id  # receivers can deduplicate


def test_only_the_first_64_kib_of_the_body_is_kept(
    listener: Listener, loopback_allowed: None
) -> None:
    listener.reply(200, b"y" * (1024 * 1024))
    outcome = http_request({"url": listener.url(), "method": "GET"}, context())
    assert isinstance(outcome, actions.Outcome)
    # 64 KiB + 1 byte is read, so the run's cap marks the output as truncated.
    text, truncated = services.cap_output(outcome.output)
    assert len(text) == 64 * 1024 and truncated


def test_status_decides_retry(listener: Listener, loopback_allowed: None) -> None:
    listener.reply(503, "busy")
    with pytest.raises(actions.ActionError) as server_error:
        http_request({"url": listener.url()}, context())
    assert server_error.value.retryable and "503" in str(server_error.value)

    listener.reply(404, "no such hook")
    with pytest.raises(actions.ActionError) as client_error:
        http_request({"url": listener.url()}, context())
    assert not client_error.value.retryable
    assert "404" in str(client_error.value) and "no such hook" in str(client_error.value)


def test_timeout_is_retryable(listener: Listener, loopback_allowed: None) -> None:
    listener.delay = 2.0
    with pytest.raises(actions.ActionError) as info:
        http_request({"url": listener.url(), "timeout_seconds": 0.3}, context())
    assert info.value.retryable and "timed out after 0.3 s" in str(info.value)


def test_redirect_is_followed_with_get(listener: Listener, loopback_allowed: None) -> None:
    listener.reply(303, "", {"Location": "/done"})
    listener.reply(200, "landed")
    outcome = http_request({"url": listener.url("/start"), "json": {"a": 1}}, context())
    assert isinstance(outcome, actions.Outcome)
    assert outcome.output == "landed" and outcome.result["redirects"] == 1
    assert [(r.method, r.path) for r in listener.requests] == [("POST", "/start"), ("GET", "/done")]


@pytest.mark.parametrize(
    ("template", "reason"),
    [
        ("http://127.0.0.1:{port}/", "loopback"),
        ("http://localhost:{port}/", "loopback"),
        ("http://[::1]:{port}/", "loopback"),
        ("http://0x7f000001:{port}/", "loopback"),
        ("http://2130706433:{port}/", "loopback"),
        ("http://[::ffff:127.0.0.1]:{port}/", "loopback"),
        ("http://0.0.0.0:{port}/", "unspecified"),
        ("http://10.0.0.1/", "private"),
        ("http://192.168.1.1/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://224.0.0.1/", "multicast"),
        # IPv6 forms that carry an IPv4 address are judged by that address.
        ("http://[2002:7f00:1::1]:{port}/", "6to4 address wrapping 127.0.0.1, a loopback"),
        ("http://[2002:a9fe:a9fe::]/", "6to4 address wrapping 169.254.169.254, the cloud"),
        ("http://[2002:c0a8:101::1]/", "6to4 address wrapping 192.168.1.1, a private"),
        ("http://[2001:0:7f00:1::1]/", "Teredo address whose server is 127.0.0.1"),
        # Teredo's client address is stored inverted: 3fff:fdd2 is 192.0.2.45.
        ("http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "whose client is 192.0.2.45"),
        ("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", "whose client is 127.0.0.1"),
        ("http://[::127.0.0.1]:{port}/", "IPv4-compatible address for 127.0.0.1, a loopback"),
        ("http://[64:ff9b::a00:1]/", "NAT64 address for 10.0.0.1, a private"),
        ("http://[fec0::1]/", "site-local"),
        ("http://[64:ff9b:1::1]/", "local-use NAT64"),
        ("file:///etc/passwd", "only http:// and https://"),
        ("ftp://example.com/", "only http:// and https://"),
        ("gopher://127.0.0.1:{port}/", "only http:// and https://"),
    ],
)
def test_private_destinations_are_refused_before_connecting(
    template: str, reason: str, listener: Listener, nothing_allowed: None, connects: list[object]
) -> None:
    url = template.format(port=listener.port)
    with pytest.raises(actions.ActionError) as info:
        http_request({"url": url}, context())
    message = str(info.value)
    assert message.startswith("refused") and reason in message
    assert not info.value.retryable
    if "://" in url and url.startswith("http"):
        assert "TASKS_HTTP_ALLOWED_NETWORKS" in message  # says how to allow it
    assert connects == []  # no connection was even attempted
    assert listener.connections == 0 and listener.requests == []


@pytest.mark.parametrize(
    "address", ["2002:808:808::1", "2001:0:4136:e378:8000:63bf:f7f7:f7f7", "2606:4700::1111"]
)
def test_ipv6_wrapping_a_public_ipv4_or_plain_global_is_not_refused(
    address: str, nothing_allowed: None
) -> None:
    # The IPv4-carrying checks judge the carried address: 6to4 of 8.8.8.8 is a public host.
    # Teredo (2001::/32) stays refused as a whole: Python's tables list it as private.
    reason = refusal_reason(ipaddress.ip_address(address))
    if address.startswith("2001:0:"):
        assert reason == "a private address"
    else:
        assert reason is None


@pytest.mark.parametrize(
    "target",
    ["http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/admin", "http://[::1]:{port}/"],
)
def test_redirect_to_a_private_address_is_refused(
    target: str, listener: Listener, loopback_allowed: None, connects: list[object]
) -> None:
    listener.reply(302, "", {"Location": target.format(port=listener.port)})
    with pytest.raises(actions.ActionError) as info:
        http_request({"url": listener.url()}, context())
    assert str(info.value).startswith("refused") and not info.value.retryable
    assert listener.connections == 1  # only the first hop reached the listener
    assert connects == [("127.0.0.1", listener.port)]


def test_name_resolving_to_any_refused_address_is_refused(
    nothing_allowed: None, connects: list[object]
) -> None:
    # "localhost" may resolve to both ::1 and 127.0.0.1; each answer is checked at connect
    # time, from the same lookup that is used to connect (so a rebinding DNS server gains
    # nothing by answering differently the second time).
    with pytest.raises(actions.ActionError, match="resolves to .*loopback"):
        http_request({"url": "http://localhost/"}, context())
    assert connects == []


def test_allowance_is_by_network(listener: Listener, settings: object) -> None:
    settings.TASKS_HTTP_ALLOWED_NETWORKS = ["10.0.0.0/8"]  # type: ignore[attr-defined]
    with pytest.raises(actions.ActionError, match="loopback"):
        http_request({"url": listener.url()}, context())
    settings.TASKS_HTTP_ALLOWED_NETWORKS = ["127.0.0.0/8"]  # type: ignore[attr-defined]
    assert http_request({"url": listener.url()}, context()).output == "ok"  # type: ignore[union-attr]


@pytest.mark.django_db
def test_bad_urls_and_payloads_are_refused_when_the_task_is_saved() -> None:
    for payload, text in [
        ({"url": "file:///etc/passwd"}, "only http:// and https://"),
        ({"url": "http://"}, "no host"),
        ({"url": "https://user:pw@example.com/"}, "credentials"),
        ({"url": "https://example.com/", "method": "TRACE"}, "'TRACE' is not one of"),
        ({"url": "https://example.com/", "timeout_seconds": 301}, "301 is greater than"),
        # A header's value is write-only: the rule is named, the value not quoted back.
        ({"url": "https://example.com/", "headers": {"X-A": 1}}, "headers.X-A: does not satisfy"),
    ]:
        with pytest.raises(ValidationError) as info:
            services.task_create(action="http", payload=payload)
        assert text in " ".join(info.value.message_dict["payload"]), payload


# --- end to end: a real worker (loopback allowed in its environment) ------------------------


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_5xx_is_retried_then_succeeds_through_the_worker(
    listener: Listener, actions_worker: object, actions_queue: str
) -> None:
    listener.reply(503, "try later")
    listener.reply(200, "delivered")
    task = services.task_create(
        id="webhook-retry",
        action="http",
        queue=actions_queue,
        max_retries=1,
        retry_backoff_seconds=1,
        payload={"url": listener.url(), "json": {"event": "paid"}, "headers": {"X-Key": "k1"}},
    )
    first = services.task_execute(task=task)
    wait_until(
        lambda: Run.objects.filter(task=task, status=RunStatus.COMPLETED).exists(),
        timeout=30,
        message="the retry to complete",
    )
    first.refresh_from_db()
    assert first.status == RunStatus.RETRYING and "503" in first.error
    second = Run.objects.get(task=task, attempt=2)
    assert second.status == RunStatus.COMPLETED
    assert second.output == "delivered" and second.result["status"] == 200
    assert [json.loads(r.body) for r in listener.requests] == [{"event": "paid"}] * 2
    assert all(r.headers["X-Key"] == "k1" for r in listener.requests)
    assert [r.headers["X-Task-Run-Id"] for r in listener.requests] == [
        str(first.id),
        str(second.id),
    ]


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_4xx_fails_without_retry_through_the_worker(
    listener: Listener, actions_worker: object, actions_queue: str
) -> None:
    listener.reply(410, "hook removed")
    task = services.task_create(
        id="webhook-gone",
        action="http",
        queue=actions_queue,
        max_retries=3,
        retry_backoff_seconds=1,
        payload={"url": listener.url()},
    )
    run = services.task_execute(task=task)
    wait_until(lambda: finished(run), timeout=30, message="the run to fail")
    assert run.status == RunStatus.FAILED
    assert "410" in run.error and "hook removed" in run.error
    threading.Event().wait(1.5)  # a retry would have been created at once; give it time anyway
    assert Run.objects.filter(task=task).count() == 1
    assert len(listener.requests) == 1


def test_a_redirect_to_another_origin_carries_none_of_the_payload_headers(
    listener: Listener, loopback_allowed: None
) -> None:
    # 127.0.0.1 and localhost are two origins on the same listener.
    listener.reply(307, "", {"Location": f"http://localhost:{listener.port}/other"})
    listener.reply(200, "landed")
    secrets = {"Authorization": "Bearer a", "X-Api-Key": "k", "Cookie": "c", "X-Custom": "x"}
    outcome = http_request({"url": listener.url("/start"), "headers": secrets}, context())
    assert isinstance(outcome, actions.Outcome) and outcome.output == "landed"
    first, second = listener.requests
    assert all(first.headers.get(name) == value for name, value in secrets.items())
    assert not {name.lower() for name in second.headers} & {n.lower() for n in secrets}
    assert second.headers.get("X-Task-Run-Id") == first.headers.get("X-Task-Run-Id")
