"""The ``http`` action: webhook delivery that cannot be turned against our own network.

Server-side request forgery is stopped where it matters, at connect time: the connection
resolves the host itself, checks **every** address it resolves to, and connects to that exact
checked address, so a DNS answer that changes between a check and the connect (rebinding)
gains nothing. Refused unless inside ``TASKS_HTTP_ALLOWED_NETWORKS``: private, loopback,
link-local (the cloud metadata address 169.254.169.254 among them), multicast, unspecified,
reserved and other non-global addresses. An IPv6 address that carries an IPv4 address
(IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible ``::a.b.c.d``, 6to4 ``2002:AABB:CCDD::/16``,
Teredo ``2001::/32`` with its server and client, NAT64 ``64:ff9b::/96``) is refused when the
IPv4 address is; site-local ``fec0::/10`` and local-use NAT64 ``64:ff9b:1::/48`` are refused
outright (Python 3.11's ``ipaddress`` tables call them global). Numeric spellings such as
``0x7f000001`` or ``2130706433`` resolve to 127.0.0.1 and are refused as such.

Redirects are followed by hand (at most ``TASKS_HTTP_MAX_REDIRECTS``) and every hop goes
through the same check; when a redirect leaves the original origin, every header the payload
set is dropped (any of them may be a credential: ``Authorization``, ``X-Api-Key``, ...) and
only the action's own (``User-Agent``, ``X-Task-Run-Id``, ``Content-Type``) go on; an edit of
the task that moves ``url`` to another origin clears the headers unless they are sent again
(``tasks_app.vocabulary.secret_fields``). No proxy from the environment is used.

Outcome: 2xx and other non-error answers complete the run with the first 64 KiB of the body
as output and ``{"status", "headers", "url", "redirects"}`` as result. 5xx, 408, 429,
timeouts and connection errors raise a retryable :class:`ActionError`; other 4xx and refused
addresses fail without retry.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import re
import socket
import time
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urljoin, urlsplit

from django.core.exceptions import ImproperlyConfigured

from ..conf import app_settings
from .base import JSON, ActionError, Outcome, PayloadError, RunContext, register

METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]
DEFAULT_TIMEOUT_SECONDS = 10.0
MAX_TIMEOUT_SECONDS = 300
REDIRECT_STATUSES = {301, 302, 303, 307, 308}
RETRYABLE_4XX = {408, 429}  # "try again later" answers
USER_AGENT = "scheduled-tasks-webhook/1"
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
NAT64_WELL_KNOWN = ipaddress.IPv6Network("64:ff9b::/96")
IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
# Not global, although Python 3.11's tables say they are.
NON_GLOBAL_IPV6 = (
    (ipaddress.IPv6Network("fec0::/10"), "a site-local"),
    (ipaddress.IPv6Network("64:ff9b:1::/48"), "a local-use NAT64"),
)

SCHEMA: dict[str, JSON] = {
    "type": "object",
    "properties": {
        "url": {"type": "string", "minLength": 1, "maxLength": 4096},
        "method": {"enum": METHODS, "default": "POST"},
        "headers": {
            # Webhook credentials live here: shown as "set" once saved (secret_fields).
            "writeOnly": True,
            "description": "Request headers (credentials among them): never shown once saved.",
            "type": "object",
            "additionalProperties": {"type": "string", "maxLength": 8192},
            "propertyNames": {"pattern": "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$"},
        },
        "json": {},
        "timeout_seconds": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": MAX_TIMEOUT_SECONDS,
            "default": DEFAULT_TIMEOUT_SECONDS,
        },
    },
    "required": ["url"],
    "additionalProperties": False,
}


class AddressRefused(ActionError):
    """The destination resolves to an address this system does not call."""

    def __init__(self, message: str):
        super().__init__(message, retryable=False)


# What a header value cannot hold and still be sent (``http.client`` refuses a line break;
# the other control characters are refused as well): refused when the task is saved, naming
# the header but never quoting its value.
_UNSENDABLE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def check_payload(payload: dict[str, JSON]) -> None:
    """Save-time checks beyond the schema: an absolute http(s) URL with a host; header values
    that can be sent (no line break or other control character; Latin-1 text, as HTTP/1.1
    sends it)."""
    errors: list[str] = []
    try:
        _split_url(str(payload["url"]))
    except ActionError as exc:
        errors.append(f"url: {exc}")
    headers = payload.get("headers")
    for name, value in headers.items() if isinstance(headers, dict) else ():
        if not isinstance(value, str):
            continue
        if _UNSENDABLE.search(value):
            errors.append(
                f"headers.{name}: a header value cannot hold a line break or another control "
                "character (it could not be sent); the value is not shown (write-only)"
            )
        elif not value.isascii():
            try:
                value.encode("latin-1")
            except UnicodeEncodeError:
                errors.append(
                    f"headers.{name}: a header value must be Latin-1 text (it could not be "
                    "sent); the value is not shown (write-only)"
                )
    if errors:
        raise PayloadError(errors)


@register(
    "http",
    schema=SCHEMA,
    description="Sends an HTTP request (webhook); private addresses are refused.",
    validate=check_payload,
    permission="tasks_app.use_action_http",
    secrets_bound_to="url",
)
def http_request(payload: dict[str, JSON], ctx: RunContext) -> Outcome:
    url = str(payload["url"])
    method = str(payload.get("method") or "POST")
    timeout = float(payload.get("timeout_seconds") or DEFAULT_TIMEOUT_SECONDS)
    headers = {"User-Agent": USER_AGENT, "X-Task-Run-Id": ctx.run_id}
    body: bytes | None = None
    if "json" in payload:
        body = json.dumps(payload["json"]).encode()
        headers["Content-Type"] = "application/json"
    own = dict(headers)  # what goes on to another origin after a redirect
    headers.update({str(k): str(v) for k, v in (payload.get("headers") or {}).items()})
    deadline = time.monotonic() + timeout
    limit = app_settings.OUTPUT_LIMIT_BYTES

    redirects = 0
    while True:
        response = _send(
            method, url, headers, body, timeout=timeout, deadline=deadline, limit=limit
        )
        location = response.headers.get("location")
        if response.status not in REDIRECT_STATUSES or not location:
            break
        if redirects >= app_settings.HTTP_MAX_REDIRECTS:
            raise ActionError(
                f"too many redirects (more than {app_settings.HTTP_MAX_REDIRECTS}, "
                f"TASKS_HTTP_MAX_REDIRECTS) starting at {payload['url']}",
                retryable=False,
            )
        redirects += 1
        target = urljoin(url, location)
        if _origin(target) != _origin(url):
            headers = {k: v for k, v in own.items() if k in headers}
        if response.status == 303 or (response.status in (301, 302) and method == "POST"):
            method, body = ("HEAD" if method == "HEAD" else "GET"), None
            headers.pop("Content-Type", None)
        url = target

    text = response.body.decode("utf-8", errors="replace")
    result = {
        "status": response.status,
        "headers": response.headers,
        "url": url,
        "redirects": redirects,
    }
    if response.status >= 500 or response.status in RETRYABLE_4XX:
        raise ActionError(f"{method} {url} answered {response.status}: {text[:1000]}")
    if response.status >= 400:
        raise ActionError(
            f"{method} {url} answered {response.status} (not retried): {text[:1000]}",
            retryable=False,
        )
    return Outcome(output=text, result=result)


@dataclass(frozen=True)
class _Response:
    status: int
    headers: dict[str, str]
    body: bytes


def _send(
    method: str,
    url: str,
    headers: dict[str, str],
    body: bytes | None,
    *,
    timeout: float,
    deadline: float,
    limit: int,
) -> _Response:
    """One request/response, reading at most ``limit + 1`` bytes of the body."""
    scheme, host, port, path = _split_url(url)
    cls = _GuardedHTTPSConnection if scheme == "https" else _GuardedHTTPConnection
    conn = cls(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        data = bytearray()
        while len(data) <= limit and method != "HEAD":
            if time.monotonic() > deadline:
                raise TimeoutError
            chunk = response.read(min(65536, limit + 1 - len(data)))
            if not chunk:
                break
            data += chunk
        return _Response(
            status=response.status,
            headers={k.lower(): v for k, v in response.getheaders()},
            body=bytes(data),
        )
    except ActionError:
        raise
    except TimeoutError as exc:
        raise ActionError(f"{method} {url} timed out after {timeout:g} s") from exc
    except ValueError as exc:  # e.g. a header value with a line break
        raise ActionError(f"{method} {url}: invalid request: {exc}", retryable=False) from exc
    except (OSError, http.client.HTTPException) as exc:
        raise ActionError(f"{method} {url} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        conn.close()


def _split_url(url: str) -> tuple[str, str, int, str]:
    """``(scheme, host, port, path?query)``; refuses anything but absolute http(s) URLs."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise AddressRefused(f"invalid URL {url!r}: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise AddressRefused(f"refused {url!r}: only http:// and https:// URLs are allowed")
    if not parts.hostname:
        raise AddressRefused(f"refused {url!r}: the URL has no host")
    if parts.username or parts.password:
        raise AddressRefused(
            f"refused {url!r}: credentials in the URL; send an Authorization header"
        )
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return scheme, parts.hostname, port or (443 if scheme == "https" else 80), path


def _origin(url: str) -> tuple[str, str, int]:
    scheme, host, port, _ = _split_url(url)
    return scheme, host.lower(), port


@lru_cache(maxsize=8)
def _parse_networks(spec: tuple[str, ...]) -> tuple[Network, ...]:
    try:
        return tuple(ipaddress.ip_network(item, strict=False) for item in spec)
    except ValueError as exc:
        raise ImproperlyConfigured(f"TASKS_HTTP_ALLOWED_NETWORKS: {exc}") from exc


def allowed_networks() -> tuple[Network, ...]:
    return _parse_networks(tuple(app_settings.HTTP_ALLOWED_NETWORKS))


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 address carries (a packet to it reaches them), labelled."""
    found: list[tuple[str, ipaddress.IPv4Address]] = []
    if address.sixtofour is not None:
        found.append(("a 6to4 address wrapping", address.sixtofour))
    if address.teredo is not None:
        server, client = address.teredo
        found += [
            ("a Teredo address whose server is", server),
            ("a Teredo address whose client is", client),
        ]
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in NAT64_WELL_KNOWN:
        found.append(("a NAT64 address for", low32))
    if address in IPV4_COMPATIBLE and int(address) > 1:  # :: and ::1 are themselves
        found.append(("an IPv4-compatible address for", low32))
    return found


def refusal_reason(address: IPAddress) -> str | None:
    """Why ``address`` is refused, or ``None`` when it may be called."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if any(address in network for network in allowed_networks()):
        return None
    if isinstance(address, ipaddress.IPv6Address):
        for label, inner in embedded_ipv4(address):
            reason = refusal_reason(inner)
            if reason is not None:
                return f"{label} {inner}, {reason}"
        for network, label in NON_GLOBAL_IPV6:
            if address in network:
                return f"{label} address"
    if address == ipaddress.IPv4Address("169.254.169.254"):
        return "the cloud metadata address"
    for label, flag in (
        ("a loopback", address.is_loopback),
        ("an unspecified", address.is_unspecified),
        ("a link-local", address.is_link_local),
        ("a multicast", address.is_multicast),
        ("a private", address.is_private),
        ("a reserved", address.is_reserved),
        ("a non-global", not address.is_global),
    ):
        if flag:
            return f"{label} address"
    return None


def resolve_checked(host: str, port: int) -> list[tuple[int, tuple[object, ...]]]:
    """Resolve ``host`` and return ``(family, sockaddr)`` pairs, all checked.

    Refuses the destination if *any* answer is refused, so a name that resolves to both a
    public and a private address cannot be used to reach the private one.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ActionError(f"cannot resolve {host!r}: {exc}") from exc
    checked: list[tuple[int, tuple[object, ...]]] = []
    for family, _type, _proto, _name, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        reason = refusal_reason(address)
        if reason is not None:
            raise AddressRefused(
                f"refused {host!r}: it resolves to {address}, {reason}; to call it, add its "
                "network to TASKS_HTTP_ALLOWED_NETWORKS"
            )
        checked.append((family, tuple(sockaddr)))
    if not checked:
        raise ActionError(f"cannot resolve {host!r}: no addresses")
    return checked


def _connect_checked(
    address: tuple[str, int], timeout: float | object = None, source_address: object = None
) -> socket.socket:
    """``socket.create_connection`` that only connects to checked addresses."""
    host, port = address
    last_error: OSError | None = None
    for family, sockaddr in resolve_checked(host, port):
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            if isinstance(timeout, int | float):
                sock.settimeout(timeout)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            sock.close()
            last_error = exc
    assert last_error is not None
    raise last_error


class _GuardedHTTPConnection(http.client.HTTPConnection):
    """Connects only to the address it resolved and checked itself (see module docs)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._create_connection = _connect_checked  # type: ignore[assignment]


class _GuardedHTTPSConnection(http.client.HTTPSConnection):
    """TLS on top of the checked connection; the certificate is verified for the host name."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._create_connection = _connect_checked  # type: ignore[assignment]
