"""The app's keys in the Django cache, each under one namespace per database.

Two projects may share a Redis database (one cache ``LOCATION``, no ``KEY_PREFIX``): their
beats' heartbeats, their workers' names and their health answers must not mix. Every key of
the app is therefore ``tasks:<digest>:<name>``, the digest a short hash of the default
database's ``HOST``, ``PORT`` and ``NAME``: the processes of one project (web, worker, beat)
share their database, so they share the namespace, and two projects apart in their database
are apart in the cache. The digest is worked out once per process (again after a test
changes ``DATABASES``).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

DIGEST_LENGTH = 10


def database_digest(database: Mapping[str, Any]) -> str:
    """A short digest of a ``DATABASES`` entry's ``HOST``, ``PORT`` and ``NAME``."""
    named = "\0".join(str(database.get(part) or "") for part in ("HOST", "PORT", "NAME"))
    return hashlib.sha256(named.encode()).hexdigest()[:DIGEST_LENGTH]


@functools.cache
def _namespace() -> str:
    return f"tasks:{database_digest(settings.DATABASES['default'])}"


def cache_key(name: str) -> str:
    """The app's cache key ``name`` (``health:workers``) for this project's database:
    ``tasks:<digest>:health:workers``."""
    return f"{_namespace()}:{name}"


@receiver(setting_changed)
def _forget_namespace(setting: str, **_: Any) -> None:
    if setting == "DATABASES":
        _namespace.cache_clear()
