"""What both anchors' settings share: the same Postgres as the project, connected as the
project connects (persistent, health-checked, ``prepare_threshold`` 5, ``random_page_cost``
1.1: project/settings.py), each anchor on a database of its own; autocommit (Django's
default): every enqueue outside ``atomic()`` is its own transaction."""

import os
from urllib.parse import urlsplit

_url = urlsplit(os.environ.get("ANCHOR_DATABASE_URL") or "postgres://root@127.0.0.1:5432/postgres")

SECRET_KEY = "bench-anchor-not-secret"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ["ANCHOR_DB"],
        "USER": _url.username or "",
        "PASSWORD": _url.password or "",
        "HOST": _url.hostname or "",
        "PORT": str(_url.port or ""),
        "CONN_MAX_AGE": 600,
        "CONN_HEALTH_CHECKS": True,
        "OPTIONS": {"prepare_threshold": 5, "options": "-c random_page_cost=1.1"},
    }
}
LOGGING_CONFIG = None
