"""The leading beat's retention thread: :func:`tasks_app.services.runs_prune`, continuously.

Beat's tick must never wait for a delete, so the pruning runs in a daemon thread of the beat
process (its own database connection; the deletes wait on Postgres, not on the GIL). The
leader calls :func:`keep_pruning` on every leader pass; the thread runs while those calls
keep coming and stops by itself within ``3 × TASKS_BEAT_TICK_SECONDS`` after they stop (the
replica lost the leadership, or beat is stopping). A pass deletes every expired row in
batches of ``TASKS_RETENTION_BATCH``; after each full batch the thread sleeps so that deletion
takes at most ``TASKS_RETENTION_SHARE`` of its time (the runs being claimed and completed
meanwhile keep their start times); after a pass that left nothing it waits
``TASKS_RETENTION_INTERVAL_SECONDS``. An error is logged and the pass retried after that wait.
"""

from __future__ import annotations

import logging
import threading
import time

from django.db import connection

from .. import services
from ..conf import app_settings

log = logging.getLogger(__name__)


class PruneThread:
    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._lead_until = 0.0
        self._wake = threading.Event()

    def keep_pruning(self) -> None:
        """Called by the leader every pass: (re)start the thread and extend its mandate."""
        self._lead_until = time.monotonic() + 3 * app_settings.BEAT_TICK_SECONDS
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="retention", daemon=True)
            self._thread.start()

    def _leading(self) -> bool:
        return time.monotonic() < self._lead_until

    def _pause(self, took: float) -> None:
        share = min(max(app_settings.RETENTION_SHARE, 0.01), 1.0)
        self._wake.wait(took * (1 - share) / share)

    def _run(self) -> None:
        try:
            while self._leading():
                try:
                    report = services.runs_prune(
                        should_stop=lambda: not self._leading(), pause=self._pause
                    )
                except Exception:
                    log.exception("retention pass failed; retrying later")
                    connection.close()
                    report = None
                if report is not None and not report.complete:
                    continue  # stopped by lost leadership: the loop condition ends it
                deadline = time.monotonic() + app_settings.RETENTION_INTERVAL_SECONDS
                while self._leading() and time.monotonic() < deadline:
                    self._wake.wait(min(1.0, app_settings.BEAT_TICK_SECONDS))
        finally:
            connection.close()


_pruner = PruneThread()


def keep_pruning() -> None:
    """The beat hook (``TaskScheduler.leader_pass``): retention runs while this beat leads."""
    _pruner.keep_pruning()
