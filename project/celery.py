"""The Celery application shared by the web, worker and beat processes.

Celery masks a setting in ``celery report`` and in a worker's ``inspect conf`` answer (which
Flower shows) only when its *name* looks secret (``celery.app.utils.HIDDEN_SETTINGS``) or is
exactly ``broker_url``/``*backend*``. Read from Django's settings under the ``CELERY``
namespace, the broker URL was named ``CELERY_BROKER_URL``, and was printed with its password;
a URL can also sit in any other setting. So Celery's filter is wrapped: after it, the password of every URL in the configuration, at any depth, is masked with
Celery's own ``sanitize_url``. (Celery's configuration holds only Django's ``CELERY_*``
settings, see :class:`DjangoCelerySettings`; through ``"django.conf:settings"`` it held all
of them, the cache URL in ``CACHES`` and the database's too, which the report printed.)
Celery offers no hook for this; its ``Settings.table`` looks the filter up by module name on
each call, which is what is replaced here.
"""

import os
from collections.abc import Iterator, Mapping
from functools import cached_property
from typing import Any

from celery import Celery
from celery.app import utils as celery_app_utils
from celery.app.defaults import SETTING_KEYS

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

MASK = "********"
_celery_filter_hidden_settings = celery_app_utils.filter_hidden_settings


def _mask_urls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _mask_urls(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_mask_urls(item) for item in value)
    if isinstance(value, str) and "://" in value:
        return celery_app_utils.sanitize_url(value, mask=MASK)
    return value


# Celery masks these through a Kombu connection, which cannot parse the URL of the Postgres
# broker (a transport of this project's); sanitize_url masks them alike.
_BROKER_URL_KEYS = frozenset({"broker_url", "broker_read_url", "broker_write_url"})


def filter_hidden_settings(conf: Mapping[str, Any]) -> dict[str, Any]:
    """Celery's filter (secret-looking names), then every URL's password masked."""
    filtered = _celery_filter_hidden_settings(
        {key: value for key, value in conf.items() if key not in _BROKER_URL_KEYS}
    )
    return {
        key: _mask_urls(value if key in _BROKER_URL_KEYS else filtered[key])
        for key, value in conf.items()
    }


celery_app_utils.filter_hidden_settings = filter_hidden_settings


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
