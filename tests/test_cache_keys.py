"""The app's cache keys, one namespace per database: two projects sharing a Redis database
(one cache, no KEY_PREFIX) keep their heartbeats and health apart."""

from __future__ import annotations

import warnings
from datetime import timedelta

from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from tasks_app.observability import health, metrics
from tasks_app.runtime.cache_keys import cache_key, database_digest


def test_two_databases_give_two_namespaces_and_one_database_one() -> None:
    shop = {"HOST": "db.internal", "PORT": "5432", "NAME": "shop"}
    blog = {**shop, "NAME": "blog"}
    assert database_digest(shop) != database_digest(blog)
    assert database_digest(shop) == database_digest({**shop, "USER": "another-role"})
    assert database_digest({**shop, "PORT": 5432}) == database_digest(shop)


def test_a_key_of_the_app_names_the_databases_digest() -> None:
    digest = database_digest(settings.DATABASES["default"])
    assert cache_key(health.WORKER_NAMES) == f"tasks:{digest}:health:workers"


def test_a_beat_tick_of_one_project_is_not_the_others() -> None:
    tick = timezone.now().replace(microsecond=0) - timedelta(seconds=3)
    health.record_beat_tick(tick)
    metrics.beat_tick_record(duration_seconds=0.25)
    ours = cache_key(health.WORKER_NAMES)
    other = {**settings.DATABASES["default"], "NAME": "another_project"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Overriding setting DATABASES can lead to ..."
        with override_settings(DATABASES={**settings.DATABASES, "default": other}):
            assert cache_key(health.WORKER_NAMES) != ours
            assert health.last_beat_tick() is None  # that project's beat never ticked
            assert metrics.beat_tick_duration_get() is None
    assert health.last_beat_tick() == tick  # ours is still there
    assert metrics.beat_tick_duration_get() == 0.25
