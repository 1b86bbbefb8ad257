"""The history benchmark's loader (bench/history_load.py, Postgres COPY) writes rows the
product reads as its own: a loaded history is listed, counted and cut to its bound by
retention like one the workers wrote. Guards the benchmark against schema drift (a new NOT
NULL column without a database default broke its COPY once)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from bench.history_load import load
from tasks_app import services
from tasks_app.models import Run, Task

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_loaded_history_is_pruned_to_its_bound() -> None:
    connection.ensure_connection()  # autocommit, as the loader's VACUUM needs
    timings = load(connection.connection, tasks=10, runs=9_000, days=90)
    assert timings["runs"] == 9_000
    assert Task.objects.count() == 10
    assert Run.objects.count() == 9_000
    assert set(Run.objects.values_list("status", flat=True)) <= {
        "completed",
        "failed",
        "expired",
        "cancelled",
        "skipped",
    }

    with override_settings(TASKS_RUN_RETENTION_DAYS=30, TASKS_FAILED_RUN_RETENTION_DAYS=30):
        report = services.runs_prune(batch=1_000)

    assert report.complete
    cutoff = timezone.now() - timedelta(days=30)
    assert not Run.objects.filter(due_at__lt=cutoff).exists()
    # Evenly spread over 90 days: about a third is younger than 30 days.
    assert 2_900 <= Run.objects.count() <= 3_100
    assert report.runs == 9_000 - Run.objects.count()
