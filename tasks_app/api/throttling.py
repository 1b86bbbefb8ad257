"""Request rates per user (and per client address for anonymous calls), counted in the
default cache, i.e. Redis in production. Rates come from ``REST_FRAMEWORK
['DEFAULT_THROTTLE_RATES']`` read on each request, so a settings change applies at once.

A limit holds under concurrency: on Redis, one script run (one round trip) drops the
requests older than the window, counts the rest and records this one only if it fits, so
``N/minute`` means at most N requests accepted in any 60 seconds, however many clients send
them at once. (DRF's own throttle reads the history, decides, then writes it back: two
clients reading at once both pass.) Other caches (the embedded stack's files, one machine)
keep DRF's way of counting.

Requests are counted before the permission check (:class:`ThrottledFirst`), so answers of
401 and 403 use up the rate like any other; a 429 does not, so a client that waits the
``Retry-After`` seconds gets through again. When the cache cannot be reached the request is
let through (and logged): an outage of the cache must not take the API down with it.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

from django.core.cache import cache
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle, UserRateThrottle

from ..runtime.cache_keys import cache_key

log = logging.getLogger(__name__)

# KEYS[1]: the client's sorted set of accepted requests (score: milliseconds).
# ARGV: window in ms, limit, a unique member for this request.
# Returns {accepted (0/1), milliseconds until a slot frees up}.
SLIDING_WINDOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window)
  return {1, 0}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, tonumber(oldest[2]) + window - now}
"""


def _redis_client(key: str) -> Any | None:
    """The redis-py client behind Django's Redis cache, or None for another cache."""
    backend = getattr(cache, "_cache", None)
    get_client = getattr(backend, "get_client", None)
    if get_client is None or not hasattr(backend, "_pools"):
        return None
    return get_client(key, write=True)


class AtomicRateThrottle(SimpleRateThrottle):
    """A sliding-window limit decided in one Redis script (see the module docstring)."""

    _wait_ms: int = 0

    @property  # type: ignore[override]
    def cache_format(self) -> str:
        """DRF's key, under this database's namespace (``cache_keys``): two projects on
        one cache count their users' requests apart (user ids repeat between projects)."""
        return cache_key("throttle:%(scope)s:%(ident)s")

    def get_rate(self) -> str | None:
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)  # type: ignore[no-any-return]

    def allow_request(self, request: Request, view: Any) -> bool:
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        try:
            key = cache.make_and_validate_key(self.key)
            client = _redis_client(key)
            if client is None:
                return super().allow_request(request, view)
            accepted, wait_ms = client.eval(
                SLIDING_WINDOW,
                1,
                key,
                int(self.duration * 1000),
                int(self.num_requests),
                secrets.token_hex(8),
            )
        except Exception:  # the cache is down: let the request through rather than fail
            log.warning("rate limit not applied: the cache could not be reached", exc_info=True)
            return True
        self._wait_ms = int(wait_ms)
        return bool(accepted)

    def wait(self) -> float | None:
        if self._wait_ms:
            return max(self._wait_ms / 1000, 0.001)
        return super().wait() if hasattr(self, "history") else None


class UserThrottle(AtomicRateThrottle, UserRateThrottle):
    pass


class AnonThrottle(AtomicRateThrottle, AnonRateThrottle):
    pass


class ThrottledFirst:
    """For an ``APIView``: count the request before checking its permissions, so refused
    answers (401, 403) are rate-limited too. Mixed in before ``APIView``."""

    def perform_authentication(self, request: Request) -> None:
        try:
            request.user  # noqa: B018  (authenticates the request)
        except Exception:
            self.check_throttles(request)  # bad credentials count as an anonymous request
            raise

    def check_permissions(self, request: Request) -> None:
        self.check_throttles(request)
        super().check_permissions(request)  # type: ignore[misc]

    def check_throttles(self, request: Request) -> None:
        if getattr(request, "_tasks_throttled", False):
            return
        request._tasks_throttled = True  # type: ignore[attr-defined]
        super().check_throttles(request)  # type: ignore[misc]
