"""A local test server seen from outside: a free port, whether a URL answers, and a browser
that keeps its cookies and sends Django's CSRF token (the end-to-end tests of ``make run``
and of the install page)."""

from __future__ import annotations

import http.cookiejar
import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from typing import Any


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - local test server
            return response.status == 200
    except OSError:
        return False


class Browser:
    def __init__(self, base: str):
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def _csrf(self) -> str:
        return next(c.value for c in self.jar if c.name == "csrftoken")

    def get(self, path: str) -> str:
        with self.opener.open(self.base + path, timeout=10) as response:
            return response.read().decode()

    def fetch(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
        """``(status, body)`` of a GET, an error status included."""
        request = urllib.request.Request(self.base + path, headers=headers or {})
        try:
            with self.opener.open(request, timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def post(self, path: str, data: dict[str, object]) -> str:
        body = urllib.parse.urlencode(
            {**data, "csrfmiddlewaretoken": self._csrf()}, doseq=True
        ).encode()
        request = urllib.request.Request(
            self.base + path, data=body, headers={"Referer": self.base + path}
        )
        with self.opener.open(request, timeout=10) as response:
            return response.read().decode()

    def api(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        request = urllib.request.Request(
            self.base + path,
            method=method,
            data=None if payload is None else json.dumps(payload).encode(),
            headers={
                "Content-Type": "application/json",
                "X-CSRFToken": self._csrf(),
                "Referer": self.base + path,
            },
        )
        with self.opener.open(request, timeout=10) as response:
            return json.loads(response.read().decode())
