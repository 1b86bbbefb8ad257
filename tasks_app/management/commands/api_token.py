"""``manage.py api_token create|list|revoke USER``: API tokens (``tasks_app.services.tokens``).

A token is printed once, by ``create``; only its first characters and a digest are stored,
so ``list`` shows those and the expiry, never a usable token. A password change revokes all
of a user's tokens.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tasks_app.observability.logs import quiet_console
from tasks_app.services import tokens


class Command(BaseCommand):
    help = "Create (shown once), list or revoke a user's API tokens."

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True)
        create = verbs.add_parser("create", help="a new token, printed once")
        create.add_argument("username")
        create.add_argument(
            "--days",
            type=float,
            default=None,
            help=f"days until it expires (default: TASKS_API_TOKEN_DAYS, 30; at most {tokens.MAX_TOKEN_DAYS})",
        )
        listing = verbs.add_parser("list", help="the user's tokens: first characters, expiry")
        listing.add_argument("username")
        revoke = verbs.add_parser("revoke", help="delete the user's tokens (or one: --key)")
        revoke.add_argument("username")
        revoke.add_argument("--key", default=None, help="the first characters shown by list")

    def handle(self, *args: Any, **options: Any) -> None:
        quiet_console(options["verbosity"])
        username = options["username"]
        model = get_user_model()
        try:
            user = model._default_manager.get_by_natural_key(username)
        except model.DoesNotExist:
            raise CommandError(f"username: no user {username!r}", returncode=1) from None
        verb = options["verb"]
        if verb == "create":
            try:
                minted = tokens.token_create(user=user, days=options["days"])
            except ValueError as exc:  # the rule's own words (--days ..., user ... not active)
                raise CommandError(str(exc), returncode=1) from exc
            expiry = minted.expiry.isoformat() if minted.expiry else "never"
            self.stdout.write(minted.token)
            self.stderr.write(f"Shown once: store it now. Expires {expiry}.")
        elif verb == "list":
            for token in tokens.tokens_of(user):
                expiry = token.expiry.isoformat() if token.expiry else "never"
                self.stdout.write(
                    f"{token.token_key}…  created {token.created.isoformat()}  expires {expiry}"
                )
        else:
            count = tokens.tokens_revoke(user=user, key=options["key"])
            if options["key"] and not count:
                raise CommandError(
                    f"--key: {username!r} has no token {options['key']!r}", returncode=1
                )
            self.stdout.write(f"Revoked {count} token(s) of {username}.")
