"""The API tokens page (django-rest-knox's model, ``tasks_app.services.tokens``): who holds a token,
its first characters and its expiry, never anything that authenticates. Revoking is the
delete permission; a new token is minted by a superuser here (shown once, in the message
after saving) or with ``manage.py api_token create``: a token for another user is that
user's power, so the add permission alone is not enough. Both mint through
``tokens.token_create``, one rule: an expiry left blank is ``TASKS_API_TOKEN_DAYS`` from
now, and none is later than 366 days from now (there is no token that never expires).

Registered only when ``knox`` is installed: without it, importing knox's model stops
Django's start with a ``RuntimeError``, and ``manage.py check`` could not say what is
missing (``tasks_app.E003``, ``tasks_app.checks``)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.apps import apps
from django.contrib import admin, messages
from django.http import HttpRequest

from ..services import permissions

if apps.is_installed("knox"):
    from knox.admin import AuthTokenAdmin
    from knox.models import AuthToken

    from ..services import tokens

    if admin.site.is_registered(AuthToken):
        admin.site.unregister(AuthToken)

    class TokenMintForm(forms.ModelForm):
        """Whose token and, optionally, when it expires: checked by ``tokens.token_expiry``
        (the CLI's rule), the token minted by ``tokens.token_create`` on save."""

        class Meta:
            model = AuthToken
            fields = ("user", "expiry")
            help_texts = {
                "expiry": f"Blank: {tokens.app_settings.API_TOKEN_DAYS:g} days from now "
                f"(TASKS_API_TOKEN_DAYS); at most {tokens.MAX_TOKEN_DAYS} days from now.",
            }

        def clean_expiry(self) -> Any:
            expires_at = self.cleaned_data.get("expiry")
            try:
                return tokens.token_expiry(expires_at=expires_at)
            except ValueError as exc:
                raise forms.ValidationError(str(exc).removeprefix("expiry ")) from None

        def clean_user(self) -> Any:
            user = self.cleaned_data.get("user")
            if user is not None and (problem := tokens.mint_refusal(user)) is not None:
                raise forms.ValidationError(problem)
            return user

    @admin.register(AuthToken)
    class ApiTokenAdmin(AuthTokenAdmin):
        add_form = TokenMintForm
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

        def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
            if change:  # no change permission: never reached
                return
            minted = tokens.token_create(
                user=form.cleaned_data["user"], expires_at=form.cleaned_data["expiry"]
            )
            saved = AuthToken.objects.get(digest=minted.digest)
            obj.__dict__.update({k: v for k, v in saved.__dict__.items() if k != "_state"})
            obj._state.adding, obj._state.db = False, saved._state.db
            self.message_user(
                request, f"TOKEN {minted.token} (shown once: store it now)", messages.INFO
            )
