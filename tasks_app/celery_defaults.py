"""The Celery behaviour the app depends on, carried by the app itself.

A project laid out by docs/install.md gives Celery its broker and result backend and nothing
else; what the app's guarantees and speed rest on is applied here, to the project's own
Celery app, when Django loads the app (``TasksAppConfig.ready``):

- :func:`celery_defaults` sit between the project's settings and Celery's own defaults: a
  project's own ``CELERY_*`` setting still wins, and :func:`check_celery_settings` names one that breaks a
  guarantee (``tasks_app.W004``);
- the app's queue table (``tasks_app.messaging.queues.AMQP``: quorum queue arguments) is given to the
  app unless the project chose another;
- Celery's ``app.now()`` is the database's clock (``tasks_app.runtime.clock``), so the countdown of a
  message RabbitMQ delays (quorum queues) does not depend on the publishing host's clock;
- :func:`check_celery_app` (``tasks_app.E006``) says when the project's Celery app is not
  loaded at all (``<project>/__init__.py`` does not import it): every publish would go to
  Celery's default app, another broker. :func:`project_app` refuses to publish through it.

The passwords of URLs in Celery's configuration are masked in ``celery report`` and a
worker's ``inspect conf`` answer (:func:`filter_hidden_settings`).

What only a worker process needs (its database connection kept across runs, the due lanes
consumed beside the queues) is in ``tasks_app.worker.startup``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from celery import Celery, current_app
from celery.app import utils as celery_app_utils
from celery.utils.collections import DictAttribute
from django.apps import AppConfig
from django.core import checks
from django.core.checks import CheckMessage, register
from django.core.exceptions import ImproperlyConfigured

from .conf import app_settings
from .messaging import queues
from .runtime import clock

CONSUMER_PATH = "tasks_app.worker.consumer:Consumer"
AMQP_PATH = "tasks_app.messaging.queues:AMQP"
INSTALL_DOC = "docs/install.md, step 4 (the Celery app)"
# Brokers whose publishes the broker confirms (publisher confirms), as kombu calls them.

# The highest broker priority of a classic queue (x-max-priority): a run's priority is 0-9.
MAX_PRIORITY = 10


def celery_defaults() -> dict[str, Any]:
    """Celery's settings (its own lower-case names) as the app needs them."""
    values: dict[str, Any] = {
        # One message per pool process at a time: a long run never sits on messages that
        # another worker could start (runs are claimed in the database, not by prefetch).
        "worker_prefetch_multiplier": 1,
        # Celery's consumer, minus a reference cycle per ETA run (tasks_app.worker.consumer).
        "worker_consumer": CONSUMER_PATH,
        # A worker that lost its broker connection lets its runs finish and record their
        # outcome; the broker redelivers their messages and the claim ignores them.
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        # A failed run and one killed at its hard time limit are acknowledged: their outcome
        # is recorded by the services (a lost worker process's message is requeued instead).
        "task_acks_on_failure_or_timeout": True,
        # Workers and beat wait for the broker however long it is away.
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,
        "broker_connection_timeout": 2.0,
        # A run counts as published only once the broker confirmed it.
        "broker_transport_options": {"confirm_publish": True},
        # A publish that cannot reach the broker fails fast: the run stays pending and beat
        # releases it again (tasks_app.messaging.dispatch).
        "task_publish_retry_policy": {
            "max_retries": 2,
            "interval_start": 0,
            "interval_step": 0.2,
            "interval_max": 0.5,
        },
        "result_extended": True,
        # Beat wakes at least every 5 s (fires are prepared ahead; releases are polled).
        "beat_max_loop_interval": 5,
    }
    if app_settings.QUEUE_TYPE == "quorum":
        # No x-max-priority (quorum queues refuse it); topic exchanges, so that Celery's
        # native delayed delivery holds ETA messages in RabbitMQ.
        values.update(
            task_queue_max_priority=None,
            task_default_queue_type="quorum",
            task_create_missing_queue_type="quorum",
            task_default_exchange_type="topic",
            task_create_missing_queue_exchange_type="topic",
            broker_native_delayed_delivery_queue_type="quorum",
        )
    else:
        values.update(task_queue_max_priority=MAX_PRIORITY, task_default_priority=5)
    return values


# What breaks a documented guarantee when a project sets it otherwise: the setting, the
# value the app needs, and what is lost. (Other defaults are a matter of taste.)
GUARANTEES: tuple[tuple[str, str], ...] = (
    ("worker_prefetch_multiplier", "a worker holds more messages than it runs: runs wait"),
    ("task_acks_on_failure_or_timeout", "a failed or timed-out run's message is redelivered"),
    (
        "worker_cancel_long_running_tasks_on_connection_loss",
        "a broker blip cancels the runs in progress",
    ),
    ("broker_connection_max_retries", "workers give up when the broker is away"),
    ("task_queue_max_priority", "priorities of tasks and runs are ignored by the broker"),
)


def apply(app: Celery) -> None:
    """Give the project's Celery ``app`` what the app needs (idempotent)."""
    if getattr(app, "_tasks_app_defaults", False):
        return
    app._tasks_app_defaults = True  # type: ignore[attr-defined]
    if app.configured:
        _below_project_settings(app.conf)
    else:
        app.on_after_configure.connect(_configured, sender=app, weak=False)
    # Celery builds its queue table once (a cached property): the app's class is given
    # unless the project chose its own or the table is already built.
    if "amqp" not in vars(app) and app.amqp_cls == Celery.amqp_cls:
        app.amqp_cls = AMQP_PATH
    # Celery's own "now" (a native delayed message's countdown, an ETA's conversion, the
    # date of a result) is the database's, as every decision of the app (tasks_app.runtime.clock).
    app.now = lambda: clock.now().astimezone(app.timezone)  # type: ignore[method-assign]


def _configured(sender: Celery, source: Any, **_: Any) -> None:
    _below_project_settings(source)


# The app's Celery tasks (``execute_run``, ``execute_task``): a module of the worker's room,
# so not the ``tasks`` module Celery's ``autodiscover_tasks()`` looks for. Added to Celery's
# ``include`` (the modules a worker and beat import at start, after Django is set up), next to
# the project's own, so the tasks are registered whether or not the project autodiscovers.
WORKER_TASKS_MODULE = "tasks_app.worker.celery_tasks"


def _below_project_settings(conf: Any) -> None:
    """Layer :func:`celery_defaults` between the project's settings and Celery's defaults,
    read the project's settings once (:func:`_read_once`), and include the app's tasks
    (:data:`WORKER_TASKS_MODULE`).

    (``app.add_defaults`` would put them *above* the project's configuration object: Celery
    inserts a default layer right after its ``changes`` map, so they would override the
    project's own ``CELERY_*`` settings.)"""
    values = celery_defaults()
    conf.defaults.insert(len(conf.defaults) - 1, values)
    conf.maps.insert(len(conf.maps) - 1, values)
    _read_once(conf)
    included = (conf.include,) if isinstance(conf.include, str) else tuple(conf.include or ())
    if WORKER_TASKS_MODULE not in included:
        conf.include = (*included, WORKER_TASKS_MODULE)


def _read_once(conf: Any) -> None:
    """Replace Celery's view of Django's settings (``config_from_object("django.conf:settings",
    namespace="CELERY")``) by the ``CELERY_*`` settings read once, as a plain dict.

    Through that view Celery looks every setting up with ``getattr`` on Django's lazy
    settings, under its namespaced and its own name: a setting left to the defaults costs
    two ``AttributeError`` exceptions on each lookup, and a worker and a publisher make tens
    of lookups per message (docs/scale.md). The values are the same; only the lookup is
    cheaper, and Django's other settings stay out of ``celery report`` and ``inspect conf``.
    Settings changed later (a test's ``override_settings``) are not seen by Celery, as
    Celery's own configuration is read once too."""
    from django.conf import settings as django_settings

    prefix = conf.prefix
    if not prefix:
        return
    for index, layer in enumerate(conf.defaults):
        if isinstance(layer, DictAttribute) and layer.obj is django_settings:
            names = [name for name in dir(django_settings) if name.startswith(prefix)]
            snapshot = {name: getattr(django_settings, name) for name in names}
            conf.defaults[index] = snapshot
            conf.maps[conf.maps.index(layer)] = snapshot


def loaded_app() -> Celery | None:
    """The project's Celery app, or ``None`` when only Celery's default app exists (the
    project's ``__init__.py`` does not import its ``celery.py``)."""
    app = current_app._get_current_object()
    # Celery's fallback, made on first use when no app was created: never current, "default".
    fallback = app.main == "default" and not app.set_as_current
    return None if fallback else app


NOT_LOADED = (
    "the project's Celery app is not loaded, so runs would be published through Celery's "
    "default app (another broker) and no worker would see them"
)
NOT_LOADED_FIX = (
    "Import it in your project package's __init__.py: "
    '`from .celery import app as celery_app` and `__all__ = ["celery_app"]` '
    f"({INSTALL_DOC})."
)


def project_app() -> Celery:
    """The Celery app every publish goes through; refuses Celery's default app."""
    app = loaded_app()
    if app is None:
        raise ImproperlyConfigured(f"{NOT_LOADED}. {NOT_LOADED_FIX}")
    return app


@register()
def check_celery_app(
    app_configs: Sequence[AppConfig] | None = None, **_: Any
) -> list[CheckMessage]:
    """E006: the project's Celery app is loaded with Django."""
    if loaded_app() is not None:
        return []
    return [checks.Error(NOT_LOADED + ".", hint=NOT_LOADED_FIX, id="tasks_app.E006")]


@register()
def check_celery_settings(
    app_configs: Sequence[AppConfig] | None = None, **_: Any
) -> list[CheckMessage]:
    """W004: a project's ``CELERY_*`` setting overrides one the app's guarantees rest on."""
    app = loaded_app()
    if app is None:
        return []
    wanted = celery_defaults()
    found: list[CheckMessage] = []
    for key, lost in GUARANTEES:
        if key not in wanted or app.conf.get(key) == wanted[key]:
            continue
        found.append(_overridden(key, app.conf.get(key), wanted[key], lost))
    consumer = app.conf.get("worker_consumer")
    if not _is_subclass(consumer, CONSUMER_PATH):
        found.append(
            _overridden(
                "worker_consumer", consumer, CONSUMER_PATH, "each ETA run is freed only by a GC"
            )
        )
    options = app.conf.get("broker_transport_options") or {}
    if queues.on_rabbitmq(app.conf.get("broker_url")) and not options.get("confirm_publish"):
        found.append(
            _overridden(
                "broker_transport_options",
                options,
                {**options, "confirm_publish": True},
                "a publish the broker lost counts as sent",
            )
        )
    return found


def _overridden(key: str, value: Any, wanted: Any, lost: str) -> CheckMessage:
    name = f"CELERY_{key.upper()}"
    return checks.Warning(
        f"{name} is {value!r}, not {wanted!r}: {lost}.",
        hint=f"Remove {name} from your settings (tasks_app sets it), or set it to {wanted!r}.",
        id="tasks_app.W004",
    )


def _is_subclass(path: Any, base_path: str) -> bool:
    from celery.utils.imports import symbol_by_name

    try:
        cls, base = symbol_by_name(path), symbol_by_name(base_path)
    except (ImportError, AttributeError, ValueError):
        return False
    return isinstance(cls, type) and issubclass(cls, base)


# --- Passwords masked in what Celery prints -------------------------------------------------
# Celery masks a setting in ``celery report`` and in a worker's ``inspect conf`` answer (which
# Flower shows) only when its *name* looks secret (``celery.app.utils.HIDDEN_SETTINGS``) or is
# exactly ``broker_url``/``*backend*``; a URL with a password can sit in any other setting
# (a project's ``CELERY_BROKER_TRANSPORT_OPTIONS``, a result backend's). So Celery's filter is
# wrapped: after it, the password of every URL in the configuration, at any depth, is masked
# with Celery's own ``sanitize_url``. Celery offers no hook for this; its ``Settings.table``
# looks the filter up by module name on each call, which is what is replaced here.
MASK = "********"
_celery_filter_hidden_settings = celery_app_utils.filter_hidden_settings
# Celery masks these through a Kombu connection, which cannot parse the URL of every
# transport (the demo's Postgres broker); sanitize_url masks them alike.
_BROKER_URL_KEYS = frozenset({"broker_url", "broker_read_url", "broker_write_url"})


def _mask_urls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _mask_urls(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_mask_urls(item) for item in value)
    if isinstance(value, str) and "://" in value:
        return celery_app_utils.sanitize_url(value, mask=MASK)
    return value


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
