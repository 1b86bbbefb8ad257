"""The API tokens page (django-rest-knox's model, ``tasks_app.tokens``): who holds a token,
its first characters and its expiry, never anything that authenticates. Revoking is the
delete permission; a new token is minted by a superuser here (shown once, in the message
after saving) or with ``manage.py api_token create``: a token for another user is that
user's power, so the add permission alone is not enough.

Registered only when ``knox`` is installed: without it, importing knox's model stops
Django's start with a ``RuntimeError``, and ``manage.py check`` could not say what is
missing (``tasks_app.E003``, ``tasks_app.checks``)."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.contrib import admin
from django.http import HttpRequest

from .. import permissions

if apps.is_installed("knox"):
    from knox.admin import AuthTokenAdmin
    from knox.models import AuthToken

    if admin.site.is_registered(AuthToken):
        admin.site.unregister(AuthToken)

    @admin.register(AuthToken)
    class ApiTokenAdmin(AuthTokenAdmin):
        list_display = ("token_key", "user", "created", "expiry")
        search_fields = ("token_key", "user__username")
        list_select_related = ("user",)

        def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
            return ("user", "expiry") if obj is None else ("token_key", "user", "created", "expiry")

        def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
            return () if obj is None else ("token_key", "user", "created", "expiry")

        def has_add_permission(self, request: HttpRequest) -> bool:
            return permissions.may_mint_tokens(request.user)

        def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
            return False
