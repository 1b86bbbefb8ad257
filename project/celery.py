"""The Celery application shared by the web, worker and beat processes (Celery's Django guide's
``celery.py``), configured from Django's ``CELERY_*`` settings through
:class:`DjangoCelerySettings`. What the app needs of Celery it sets itself
(``tasks_app.celery_defaults``), as in any project, including the masking of URLs' passwords
in ``celery report`` and ``inspect conf``."""

import os
from collections.abc import Iterator, Mapping
from functools import cached_property
from typing import Any

from celery import Celery
from celery.app.defaults import SETTING_KEYS

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")


class DjangoCelerySettings(Mapping[str, Any]):
    """Django's ``CELERY_*`` settings as a plain mapping, read once, when Celery first needs
    its configuration (as ``"django.conf:settings"`` would be), under Celery's own lowercase
    names (``CELERY_ACCEPT_CONTENT`` is ``accept_content``).

    Read with ``namespace="CELERY"``, a Django name that is also one of Celery's pre-4.0
    names (``CELERY_ACCEPT_CONTENT``, ``CELERY_TIMEZONE``, ...) counts as a deprecated
    setting, and every worker printed one ``CDeprecationWarning`` per such name at start-up.
    A name that is not a Celery setting keeps its Django name (``CELERY_DB_REUSE_MAX``, which
    Celery's Django fixup reads as such).

    Through ``"django.conf:settings"`` Celery looks every setting up with ``getattr`` on
    Django's lazy settings, and a setting left at Celery's default costs two
    ``AttributeError`` exceptions (~10 µs) on every lookup, and ``send_task`` makes about
    ten per message (docs/scale.md). The values are Django's; only the lookup is cheaper, and
    the rest of Django's settings stays out of Celery's configuration (and so out of
    ``celery report`` and a worker's ``inspect conf`` answer).
    """

    @cached_property
    def _values(self) -> dict[str, Any]:
        from django.conf import settings

        values = {}
        for name in dir(settings):
            if name.startswith("CELERY_"):
                key = name.removeprefix("CELERY_").lower()
                values[key if key in SETTING_KEYS else name] = getattr(settings, name)
        return values

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


app = Celery("project")
app.config_from_object(DjangoCelerySettings())
app.autodiscover_tasks()
