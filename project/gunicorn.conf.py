"""gunicorn settings: bind to $PORT when a PaaS sets it, 8000 otherwise."""

import os

from tasks_app.runtime import hardening

bind = f"{os.environ.get('HOST', '0.0.0.0')}:{os.environ.get('PORT', '8000')}"  # noqa: S104
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
# Threads per worker (gthread): a slow call (a health check waiting on the broker) does not
# hold up the requests behind it.
threads = int(os.environ.get("WEB_THREADS", "4"))
accesslog = "-"


def on_starting(server: object) -> None:
    """The web process is non-dumpable too (and its workers, which it forks): a program the
    ``exec`` action runs on the same machine as the same user cannot read its environment
    (``tasks_app.runtime.hardening``)."""
    hardening.make_non_dumpable()
