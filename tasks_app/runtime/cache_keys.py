"""The app's keys in the Django cache, each under one namespace per database.

Two projects may share a Redis database (one cache ``LOCATION``, no ``KEY_PREFIX``): their
beats' heartbeats, their workers' names and their health answers must not mix. Every key of
the app is therefore ``tasks:<digest>:<name>``, the digest a short hash of the default
database's ``HOST``, ``PORT`` and ``NAME``: the processes of one project (web, worker, beat)
share their database, so they share the namespace, and two projects apart in their database
are apart in the cache.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from typing import Any

from django.conf import settings

DIGEST_LENGTH = 10


def database_digest(database: Mapping[str, Any]) -> str:
    """A short digest of a ``DATABASES`` entry's ``HOST``, ``PORT`` and ``NAME`` (an empty
    ``PORT`` is Postgres's 5432, as libpq reads it)."""
    return _digest(
        str(database.get("HOST") or ""),
        str(database.get("PORT") or 5432),
        str(database.get("NAME") or ""),
    )


@functools.cache
def _digest(host: str, port: str, name: str) -> str:
    named = "\0".join((host, port, name))
    return hashlib.sha256(named.encode()).hexdigest()[:DIGEST_LENGTH]


def cache_key(name: str) -> str:
    """The app's cache key ``name`` (``health:workers``) for this project's database:
    ``tasks:<digest>:health:workers``. Read from the settings at each call: a test runner
    renames the database after start-up."""
    return f"tasks:{database_digest(settings.DATABASES['default'])}:{name}"
