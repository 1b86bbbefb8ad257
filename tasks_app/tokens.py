"""API tokens: django-rest-knox's, stored as digests, shown once, with an expiry.

Why knox rather than DRF's ``authtoken``: DRF stores the token itself, so anyone who can read
the table (a view permission in the admin, a database dump, a backup) holds every user's
credential; knox stores a SHA-512 digest and the first 15 characters only, which cannot be
turned back into a token, and gives every token an expiry. It is a maintained Jazzband
package that supports the Django and DRF versions this app runs on, so no hand-written
hashing is needed.

What this module adds: a password change (``set_password`` then ``save``, as the admin's
password form, ``changepassword`` and ``set_password`` in code all do) and a deactivation
(``is_active`` saved false) delete the user's tokens, so activating the user again brings
none back; and tokens are minted and revoked here only (``manage.py api_token``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db.models.signals import post_save
from django.dispatch import receiver
from django.utils import timezone
from knox.models import AuthToken
from knox.settings import CONSTANTS

from .conf import app_settings

# The longest life a token may be given, whatever is asked for.
MAX_TOKEN_DAYS = 366


@dataclass(frozen=True)
class MintedToken:
    """The token's text (shown once, never stored) and when it stops working."""

    token: str
    key: str
    expiry: datetime | None


def token_create(*, user: AbstractBaseUser, days: float | None = None) -> MintedToken:
    """A new token for ``user``, valid ``days`` days (default: ``TASKS_API_TOKEN_DAYS``).

    Raises ``ValueError`` naming the rule when ``days`` is not in (0, 366]."""
    if days is None:
        days = app_settings.API_TOKEN_DAYS
    elif not 0 < days <= MAX_TOKEN_DAYS:
        raise ValueError(f"--days must be more than 0 and at most {MAX_TOKEN_DAYS}")
    instance, token = AuthToken.objects.create(user=user, expiry=timedelta(days=days))
    return MintedToken(token=token, key=instance.token_key, expiry=instance.expiry)


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


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def _revoke_tokens_on_password_change_or_deactivation(sender: Any, instance: Any, **_: Any) -> None:
    # ``set_password`` keeps the new raw password in ``_password`` until the save ends;
    # a hash upgrade at login clears it first, so it does not count as a change. A user
    # saved inactive loses its tokens for good (knox only refuses them while inactive).
    changed_password = getattr(instance, "_password", None) is not None
    if changed_password or not getattr(instance, "is_active", True):
        AuthToken.objects.filter(user=instance).delete()
