"""The client's address, as far as this deployment can vouch for it.

``TASKS_TRUSTED_PROXIES`` (DRF's ``NUM_PROXIES``) says how many reverse proxies stand in front
of web. Each appends the address it received the request from to ``X-Forwarded-For``, so with
N proxies the N-th entry from the right is what the outermost trusted proxy saw; entries to
its left were written by the client and are ignored. With 0 (the default) the header is not
read at all: ``REMOTE_ADDR`` is the client. DRF's throttles apply that rule themselves; this
module gives the same answer to django-axes (login lockout) and ``/metrics``'s network check,
so every per-client decision counts the same client.
"""

from __future__ import annotations

import ipaddress

from django.http import HttpRequest
from rest_framework.throttling import BaseThrottle


def client_ip(request: HttpRequest) -> str:
    """The client's IP address; ``REMOTE_ADDR`` when the forwarded entry is not an address."""
    remote = str(request.META.get("REMOTE_ADDR", ""))
    ident = str(BaseThrottle().get_ident(request))  # type: ignore[arg-type]
    try:
        return str(ipaddress.ip_address(ident))
    except ValueError:
        return remote
