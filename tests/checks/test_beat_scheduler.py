"""W001: CELERY_BEAT_SCHEDULER is not the app's scheduler; the same rule in beat's start log
(a real beat: tests/e2e/test_beat_scheduler_warning.py) and in /api/health's "beat down"."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.core.cache import cache
from django.test import override_settings
from django.utils import timezone

from tasks_app.beat.scheduler import TaskScheduler
from tasks_app.checks import check_beat_scheduler, warn_on_foreign_scheduler
from tasks_app.observability import health
from tasks_app.runtime.cache_keys import cache_key


class OurSchedulerExtended(TaskScheduler):
    """A project's own subclass: still the app's scheduler."""


@pytest.mark.parametrize(
    "value",
    [
        "celery.beat:PersistentScheduler",
        "django_celery_beat.schedulers:DatabaseScheduler",
        "django_celery_beat.schedulers.DatabaseScheduler",
    ],
)
def test_another_scheduler_is_a_warning_naming_the_setting(value: str) -> None:
    with override_settings(CELERY_BEAT_SCHEDULER=value):
        [warning] = check_beat_scheduler()

    assert warning.id == "tasks_app.W001" and not warning.is_serious()
    assert warning.msg.startswith(f"CELERY_BEAT_SCHEDULER is {value.replace('.D', ':D')}, not")
    assert warning.hint == (
        'Set CELERY_BEAT_SCHEDULER = "tasks_app.beat.scheduler:TaskScheduler" '
        "(and start beat without -S)."
    )


def test_a_scheduler_that_does_not_import_is_named_as_written() -> None:
    with override_settings(CELERY_BEAT_SCHEDULER="myproject.beat:Gone"):
        [warning] = check_beat_scheduler()
    assert "CELERY_BEAT_SCHEDULER is 'myproject.beat:Gone'" in warning.msg


@pytest.mark.parametrize(
    "value",
    ["tasks_app.beat.scheduler:TaskScheduler", "tasks_app.beat.scheduler.TaskScheduler"],
)
def test_the_apps_scheduler_passes(value: str) -> None:
    with override_settings(CELERY_BEAT_SCHEDULER=value):
        assert check_beat_scheduler() == []


def test_a_subclass_or_the_class_itself_passes() -> None:
    for value in (TaskScheduler, OurSchedulerExtended):
        with override_settings(CELERY_BEAT_SCHEDULER=value):
            assert check_beat_scheduler() == []


def test_beat_started_with_another_scheduler_logs_a_warning_naming_the_setting(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from celery.beat import PersistentScheduler

    service = SimpleNamespace(scheduler=object.__new__(PersistentScheduler))
    with caplog.at_level(logging.WARNING, logger="tasks_app.checks"):
        warn_on_foreign_scheduler(sender=service)
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "beat runs celery.beat:PersistentScheduler" in record.getMessage()
    assert "CELERY_BEAT_SCHEDULER = 'tasks_app.beat.scheduler:TaskScheduler'" in (
        record.getMessage()
    )

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tasks_app.checks"):
        warn_on_foreign_scheduler(sender=SimpleNamespace(scheduler=object.__new__(TaskScheduler)))
    assert caplog.records == []


@pytest.fixture
def beat_silent() -> Iterator[None]:
    """Beat's heartbeat a minute old (this session's own cache), as when beat is down."""
    before = cache.get(cache_key(health.BEAT_TICK))
    health.record_beat_tick(timezone.now() - timedelta(minutes=1))
    yield
    if before is None:
        cache.delete(cache_key(health.BEAT_TICK))
    else:
        cache.set(cache_key(health.BEAT_TICK), before, timeout=None)


def test_health_names_the_setting_as_the_likely_cause_of_beat_down(beat_silent: None) -> None:
    with override_settings(CELERY_BEAT_SCHEDULER="celery.beat:PersistentScheduler"):
        check = health.check_beat()
    assert not check.ok
    assert check.error.startswith("last beat tick 60 s ago")
    cause = "likely cause: CELERY_BEAT_SCHEDULER is celery.beat:PersistentScheduler, not"
    assert cause in check.error

    check = health.check_beat()  # the demo's settings: the app's scheduler
    assert not check.ok and "CELERY_BEAT_SCHEDULER" not in check.error
