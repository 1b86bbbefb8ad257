"""Request rates per user (and per client address for anonymous calls), counted in the
default cache, i.e. Redis in production. Rates come from ``REST_FRAMEWORK
['DEFAULT_THROTTLE_RATES']`` read on each request, so a settings change applies at once."""

from __future__ import annotations

from rest_framework.settings import api_settings
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle


class UserThrottle(UserRateThrottle):
    def get_rate(self) -> str | None:
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)  # type: ignore[no-any-return]


class AnonThrottle(AnonRateThrottle):
    def get_rate(self) -> str | None:
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)  # type: ignore[no-any-return]
