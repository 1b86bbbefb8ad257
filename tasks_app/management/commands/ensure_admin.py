"""Create an admin login if the project has none (used by ``make run``)."""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the 'admin' superuser if no superuser exists (DJANGO_SUPERUSER_PASSWORD or generated)."

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        if User.objects.filter(is_superuser=True).exists():
            return
        username = os.environ.get("DJANGO_SUPERUSER_USERNAME", "admin")
        password = os.environ.get("DJANGO_SUPERUSER_PASSWORD") or secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password)
        shown = (
            "(from DJANGO_SUPERUSER_PASSWORD)"
            if "DJANGO_SUPERUSER_PASSWORD" in os.environ
            else password
        )
        self.stdout.write(f"Created admin login: user '{username}', password {shown}")
