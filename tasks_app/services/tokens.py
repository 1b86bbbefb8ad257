"""API tokens: django-rest-knox's, stored as digests, shown once, with an expiry.

Why knox rather than DRF's ``authtoken``: DRF stores the token itself, so anyone who can read
the table (a view permission in the admin, a database dump, a backup) holds every user's
credential; knox stores a SHA-512 digest and the first 15 characters only, which cannot be
turned back into a token, and gives every token an expiry. It is a maintained Jazzband
package that supports the Django and DRF versions this app runs on, so no hand-written
hashing is needed.

What this module adds: a password change (``set_password`` then ``save``, as the admin's
password form, ``changepassword`` and ``set_password`` in code all do), a password made
unusable (``set_unusable_password``, the admin's "Disable password-based authentication")
and a deactivation (``is_active`` saved false) delete the user's tokens, so activating the
user again brings none back; and tokens are minted (one expiry rule: ``token_expiry``) and
revoked here only, whichever way in (``manage.py api_token``, the admin's tokens page).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.hashers import is_password_usable
from django.db.models.signals import post_save, pre_save
from django.dispatch import receiver
from django.utils import timezone
from knox.models import AuthToken
from knox.settings import CONSTANTS

from ..conf import app_settings

# The longest life a token may be given, whatever is asked for.
MAX_TOKEN_DAYS = 366


@dataclass(frozen=True)
class MintedToken:
    """The token's text (shown once, never stored) and when it stops working."""

    token: str
    key: str
    expiry: datetime | None
    digest: str = ""


TOO_LONG = f"must be at most {MAX_TOKEN_DAYS} days from now"


def token_expiry(
    *, days: float | None = None, expires_at: datetime | None = None, now: datetime | None = None
) -> datetime:
    """When a token minted now stops working: ``days`` from now, or ``expires_at``, or
    ``TASKS_API_TOKEN_DAYS`` from now when neither is given; never later than
    ``MAX_TOKEN_DAYS`` from now, and never "never". The one rule of every way to mint one
    (``manage.py api_token create``, the admin's tokens page). ``ValueError`` names the
    rule: ``--days ...`` or ``expiry ...``."""
    now = now or timezone.now()
    if days is not None and expires_at is not None:
        raise ValueError("give --days or an expiry, not both")
    if expires_at is not None:
        if timezone.is_naive(expires_at):
            raise ValueError("expiry must include a time-zone offset")
        if expires_at <= now:
            raise ValueError("expiry must be in the future")
        if expires_at > now + timedelta(days=MAX_TOKEN_DAYS):
            raise ValueError(f"expiry {TOO_LONG}")
        return expires_at
    if days is None:
        days = app_settings.API_TOKEN_DAYS  # checked when Django starts (conf)
    elif not (math.isfinite(days) and 0 < days <= MAX_TOKEN_DAYS):
        raise ValueError(f"--days must be more than 0 and at most {MAX_TOKEN_DAYS}")
    return now + timedelta(days=days)


def mint_refusal(user: AbstractBaseUser) -> str | None:
    """Why ``user`` may not be given a token (``None``: it may): an inactive user's would be
    refused, and deleted at its next save."""
    return None if user.is_active else f"user {user.get_username()!r} is not active"


def token_create(
    *, user: AbstractBaseUser, days: float | None = None, expires_at: datetime | None = None
) -> MintedToken:
    """A new token for ``user``, valid ``days`` days or until ``expires_at`` (default:
    ``TASKS_API_TOKEN_DAYS``), by :func:`token_expiry`'s rule.

    Raises ``ValueError`` naming the rule (days not in (0, 366], an expiry past 366 days or
    not in the future, an inactive user)."""
    now = timezone.now()
    expiry = token_expiry(days=days, expires_at=expires_at, now=now)
    if (problem := mint_refusal(user)) is not None:
        raise ValueError(problem)
    instance, token = AuthToken.objects.create(user=user, expiry=expiry - timezone.now())
    return MintedToken(
        token=token, key=instance.token_key, expiry=instance.expiry, digest=instance.digest
    )


def tokens_revoke(*, user: AbstractBaseUser, key: str | None = None) -> int:
    """Delete the user's tokens (only the one starting with ``key`` if given); how many."""
    tokens = AuthToken.objects.filter(user=user)
    if key:
        tokens = tokens.filter(token_key=key[: CONSTANTS.TOKEN_KEY_LENGTH])
    deleted, _ = tokens.delete()
    return deleted


def tokens_of(user: AbstractBaseUser) -> list[AuthToken]:
    """The user's tokens that have not expired, newest first."""
    return list(
        AuthToken.objects.filter(user=user).exclude(expiry__lt=timezone.now()).order_by("-created")
    )


@receiver(pre_save, sender=settings.AUTH_USER_MODEL)
def _note_password_made_unusable(
    sender: Any, instance: Any, update_fields: Any = None, **_: Any
) -> None:
    # A password made unusable (``set_unusable_password``, the admin's "Disable
    # password-based authentication") is seen against the stored one: a user who never had
    # a usable password (an account for the API alone) keeps the tokens minted for it.
    instance._tasks_password_made_unusable = False
    if instance.pk is None or instance.has_usable_password():
        return
    if update_fields is not None and "password" not in update_fields:
        return
    stored = sender._default_manager.filter(pk=instance.pk).values_list("password", flat=True)
    before = stored.first()
    instance._tasks_password_made_unusable = before is not None and is_password_usable(before)


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def _revoke_tokens_on_password_change_or_deactivation(sender: Any, instance: Any, **_: Any) -> None:
    # ``set_password`` keeps the new raw password in ``_password`` until the save ends;
    # a hash upgrade at login clears it first, so it does not count as a change. A password
    # made unusable ends the tokens as a new password does; a user saved inactive loses its
    # tokens for good (knox only refuses them while inactive).
    changed_password = getattr(instance, "_password", None) is not None
    made_unusable = getattr(instance, "_tasks_password_made_unusable", False)
    if changed_password or made_unusable or not getattr(instance, "is_active", True):
        AuthToken.objects.filter(user=instance).delete()
