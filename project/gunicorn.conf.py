"""gunicorn settings: bind to $PORT when a PaaS sets it, 8000 otherwise."""

import os

bind = f"{os.environ.get('HOST', '0.0.0.0')}:{os.environ.get('PORT', '8000')}"  # noqa: S104
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
accesslog = "-"
