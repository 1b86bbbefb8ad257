"""The fault soak, short: two minutes of process faults (worker kill -9, a deploy's SIGTERM,
the beat leader's kill -9, a worker frozen past the stall window, the wall clock of the beat
leader or a worker stepped) under load, on the shared services, with a fixed seed. It fails
when a fault loses a run, fails one, runs one twice at once, misses or doubles a fire, starts
a run early, records a fire ahead of the database's clock, or breaks a page. ``make soak`` is
the long one."""

from __future__ import annotations

import pytest

from tests.processes import process_env
from tests.soak.harness import SOAK_ENV, Soak, summary

SEED = 29

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.mark.timeout(480)
def test_two_minutes_of_process_faults_lose_nothing(process_logs, _session_queue, capsys):
    from django.conf import settings

    from project.celery import app

    with app.connection_for_write() as conn:  # leftovers of earlier modules are not ours
        try:
            conn.default_channel.queue_purge(settings.CELERY_TASK_DEFAULT_QUEUE)
        except conn.channel_errors:
            pass
    soak = Soak(
        seed=SEED,
        minutes=2,
        log_dir=process_logs / "soak",
        env=process_env(**SOAK_ENV, DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost"),
        fault_gap=(12, 18),
        drain_seconds=150,
        say=lambda text: None,
    )
    report = soak.run()
    with capsys.disabled():
        print("\n" + summary(report))
    assert set(report["faults"]) == set(soak.faults), report["fault_log"]
    assert report["problems"] == [], summary(report)
    assert report["requested"]["flaky"] > 0 and report["requested"]["long"] > 0
