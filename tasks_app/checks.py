"""Django system checks: what a project that installs the app is missing, said by
``manage.py check`` (and by every command that runs the checks: ``runserver``, ``migrate``)
with the setting's name and the line that fixes it, instead of a traceback later.

==================  =====================================================================
``E001``            the default database is not Postgres
``E002``            the Postgres server is older than 14 (``Tags.database``: ``migrate``,
                    ``check --database default``)
``E003``            an app the app needs is missing from ``INSTALLED_APPS`` (for ``migrate``:
                    only an app whose tables the app needs)
``E004``            a ``TASKS_*`` setting the app does not declare (a typo, most often; not
                    for ``migrate``)
``E005``            an ``OPTIONS`` key our task backend does not take
``E006``            the project's Celery app is not loaded (``tasks_app.celery_defaults``)
``W001``            ``CELERY_BEAT_SCHEDULER`` is not the app's scheduler
``W002``            ``@task`` functions exist but ``TASKS["default"]`` is not our backend
``W003``            the app's URLs are not in ``ROOT_URLCONF``
``W004``            a ``CELERY_*`` setting breaks a guarantee (``tasks_app.celery_defaults``)
==================  =====================================================================

docs/checks.md lists them with their fixes. The scheduler rule (:func:`beat_scheduler_problem`)
is also what beat logs at start (:func:`warn_on_foreign_scheduler`) and what ``/api/health``
names as the likely cause when beat is down.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterator, Sequence
from importlib import import_module
from typing import Any

from celery import current_app
from celery.signals import beat_init
from celery.utils.imports import load_extension_class_names, symbol_by_name
from django.apps import AppConfig, apps
from django.conf import settings
from django.core import checks
from django.core.checks import CheckMessage, Error, Tags, register
from django.db import DatabaseError, NotSupportedError, connections
from django.urls import NoReverseMatch, reverse
from django.utils.module_loading import import_string, module_has_submodule

log = logging.getLogger(__name__)

SCHEDULER_PATH = "tasks_app.beat.scheduler:TaskScheduler"
FOREIGN_SCHEDULER = (
    "beat fires none of tasks_app's schedules, releases no delayed run and records no heartbeat"
)
BACKEND_PATH = "tasks_app.django_tasks.CeleryRunBackend"
MIN_POSTGRES = (14, 0)
DEFAULT_ALIAS = "default"  # the database the app writes to, and Django's default task backend

# What the app needs, by INSTALLED_APPS name (drf-spectacular-sidecar: the API docs page's
# Swagger UI files, served as static files). django-axes and django-csp are the demo
# project's choices (login lockout, the CSP header), not the app's. The django-tasks
# backport (Django 5.2) works without being installed: only its own checks need it there.
REQUIRED_APPS = (
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_celery_beat",
    "django_celery_results",
    "rest_framework",
    "knox",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # the API docs page's Swagger UI files
)


def _id(code: str) -> str:
    return f"tasks_app.{code}"


@register()
def check_database_engine(
    app_configs: Sequence[AppConfig] | None = None, **_: Any
) -> list[CheckMessage]:
    """E001: the default database must be Postgres (its migrations and queries are
    Postgres SQL). Reads the backend's vendor, so PostGIS and other Postgres wrappers pass;
    needs no connection."""
    database = connections[DEFAULT_ALIAS]
    vendor = database.vendor
    if vendor == "postgresql":
        return []
    engine = database.settings_dict.get("ENGINE", "")
    return [
        Error(
            f"DATABASES['default']['ENGINE'] is {engine!r} ({vendor}); tasks_app needs "
            "PostgreSQL 14 or later.",
            hint='Set DATABASES["default"]["ENGINE"] = "django.db.backends.postgresql" '
            "(with NAME, USER, PASSWORD, HOST, PORT of a Postgres >= 14 database).",
            id=_id("E001"),
        )
    ]


@register(Tags.database)
def check_postgres_version(
    app_configs: Sequence[AppConfig] | None = None,
    databases: Sequence[str] | None = None,
    **_: Any,
) -> list[CheckMessage]:
    """E002: the server is Postgres 14 or later (``migrate`` and ``check --database
    default`` ask; plain ``check`` connects to nothing). A server that cannot be reached
    is for the command that needs it to report."""
    if not databases or DEFAULT_ALIAS not in databases:
        return []
    database = connections[DEFAULT_ALIAS]
    if database.vendor != "postgresql":
        return []  # E001 says it
    hint = "Upgrade the server named by DATABASES['default'] to PostgreSQL 14 or later."
    try:
        version = int(database.pg_version)  # type: ignore[attr-defined]
    except NotSupportedError as exc:  # Django's own minimum refused the connection
        return [Error(f"DATABASES['default']: {exc}", hint=hint, id=_id("E002"))]
    except DatabaseError:
        return []
    found = (version // 10000, version % 10000)
    if found >= MIN_POSTGRES:
        return []
    return [
        Error(
            f"DATABASES['default'] is PostgreSQL {found[0]}.{found[1]}; tasks_app needs "
            f"{MIN_POSTGRES[0]} or later.",
            hint=hint,
            id=_id("E002"),
        )
    ]


# The apps whose tables the app's migrations or models need: the only ones whose absence
# concerns ``migrate``. The others serve pages and files (the admin, the API, static files).
SCHEMA_APPS = (
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django_celery_beat",
    "django_celery_results",
    "knox",
)


def _for_migrate(databases: Sequence[str] | None) -> bool:
    """Whether the checks run for a command that asks the database (``migrate``, ``check
    --database``): a problem of pages or names, not of the schema, does not stop it there;
    ``check`` and ``runserver`` still report it."""
    return bool(databases)


@register()
def check_installed_apps(
    app_configs: Sequence[AppConfig] | None = None,
    databases: Sequence[str] | None = None,
    **_: Any,
) -> list[CheckMessage]:
    """E003: every app the app imports is in ``INSTALLED_APPS``, one message each (for
    ``migrate``, only the apps of :data:`SCHEMA_APPS`)."""
    needed = SCHEMA_APPS if _for_migrate(databases) else REQUIRED_APPS
    return [
        Error(
            f"INSTALLED_APPS lacks {name!r}, which tasks_app needs.",
            hint=f'Add "{name}" to INSTALLED_APPS (before "tasks_app").',
            id=_id("E003"),
        )
        for name in needed
        if not apps.is_installed(name)
    ]


def configured_beat_scheduler() -> Any:
    """The scheduler beat starts with when no ``-S`` is given: ``CELERY_BEAT_SCHEDULER``,
    else the Celery app's own ``beat_scheduler`` (a project that configures Celery in code)."""
    value = getattr(settings, "CELERY_BEAT_SCHEDULER", None)
    return value if value is not None else current_app.conf.beat_scheduler


def _scheduler_class(value: Any) -> type | None:
    """The class a ``-S`` / ``beat_scheduler`` value names (a class, ``module:Class``,
    ``module.Class`` or an alias of Celery's), as beat resolves it; ``None`` if it cannot
    be imported."""
    if isinstance(value, type):
        return value
    aliases = dict(load_extension_class_names("celery.beat_schedulers"))
    try:
        found = symbol_by_name(value, aliases=aliases)
    except (ImportError, AttributeError, ValueError):
        return None
    return found if isinstance(found, type) else None


def _name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _is_our_scheduler(cls: type | None) -> bool:
    """``TaskScheduler`` or a subclass. (Resolved from its path, as beat does: this module
    sits below the entry points, so that ``/api/health`` can ask it too.)"""
    return cls is not None and issubclass(cls, symbol_by_name(SCHEDULER_PATH))


def beat_scheduler_problem(value: Any = None) -> str | None:
    """Why beat would fire none of the app's tasks with this ``CELERY_BEAT_SCHEDULER``
    (default: the configured one), or ``None`` when it is ``TaskScheduler`` or a subclass."""
    value = configured_beat_scheduler() if value is None else value
    cls = _scheduler_class(value)
    if _is_our_scheduler(cls):
        return None
    shown = _name(cls) if cls is not None else repr(value)
    return f"CELERY_BEAT_SCHEDULER is {shown}, not {SCHEDULER_PATH}: {FOREIGN_SCHEDULER}"


@register()
def check_beat_scheduler(
    app_configs: Sequence[AppConfig] | None = None, **_: Any
) -> list[CheckMessage]:
    """W001: ``CELERY_BEAT_SCHEDULER`` is the app's scheduler (a warning: a project may run
    no beat from these settings, or pass ``-S`` on the command line)."""
    problem = beat_scheduler_problem()
    if problem is None:
        return []
    return [
        checks.Warning(
            problem + ".",
            hint=f'Set CELERY_BEAT_SCHEDULER = "{SCHEDULER_PATH}" (and start beat without -S).',
            id=_id("W001"),
        )
    ]


@beat_init.connect
def warn_on_foreign_scheduler(sender: Any = None, **_: Any) -> None:
    """At beat's start (``celery beat``, or ``worker -B``): a warning in beat's log when it
    runs another scheduler than the app's, e.g. from ``-S`` or a setting the checks did
    not see."""
    scheduler = getattr(sender, "scheduler", None)
    if scheduler is None or _is_our_scheduler(type(scheduler)):
        return
    log.warning(
        "beat runs %s (CELERY_BEAT_SCHEDULER or -S), not %s: %s. "
        "Set CELERY_BEAT_SCHEDULER = %r and start beat without -S.",
        _name(type(scheduler)),
        SCHEDULER_PATH,
        FOREIGN_SCHEDULER,
        SCHEDULER_PATH,
    )


def _task_functions() -> Iterator[Any]:
    """The ``@task`` functions (Django's task framework) of every installed app's ``tasks``
    module, the module Celery's autodiscovery imports too. Imported here if need be; a
    module that does not import is skipped (the worker that imports it reports it). Tasks
    defined elsewhere are not seen: the warning is about the common layout only."""
    from .runtime.task_framework import Task

    for config in apps.get_app_configs():
        if config.name == "tasks_app" or not module_has_submodule(config.module, "tasks"):
            continue
        try:
            module = import_module(f"{config.name}.tasks")
        except ImportError:
            continue
        yield from (value for value in vars(module).values() if isinstance(value, Task))


def _task_backends() -> dict[str, Any]:
    """``TASKS`` as the framework reads it (unset: Django's ``ImmediateBackend``)."""
    configured = getattr(settings, "TASKS", None)
    return configured if isinstance(configured, dict) else {}


def _backend_class(path: Any) -> type | None:
    """The backend class a ``TASKS`` alias names, if it is ``CeleryRunBackend`` or a
    subclass; ``None`` for any other (or one that does not import: Django says so)."""
    try:
        cls = import_string(path) if isinstance(path, str) else path
    except ImportError:
        return None
    ours = import_string(BACKEND_PATH)
    return cls if isinstance(cls, type) and issubclass(cls, ours) else None


@register()
def check_task_backend(
    app_configs: Sequence[AppConfig] | None = None, **_: Any
) -> list[CheckMessage]:
    """W002: ``@task`` functions that use the default backend are run as runs only when
    ``TASKS["default"]["BACKEND"]`` is ``CeleryRunBackend`` (or a subclass); with Django's
    default, ``ImmediateBackend``, ``.enqueue()`` runs the function in the caller and
    nothing is recorded. Silent when no installed app's ``tasks`` module defines a
    ``@task`` function on the default alias (another alias may use another backend on
    purpose)."""
    backend = _task_backends().get(DEFAULT_ALIAS, {}).get("BACKEND")
    if backend is not None and _backend_class(backend) is not None:
        return []
    found = [t.module_path for t in _task_functions() if t.backend == DEFAULT_ALIAS]
    if not found:
        return []
    shown = repr(backend) if backend is not None else "Django's ImmediateBackend (unset)"
    examples = ", ".join(sorted(found)[:3]) + (" ..." if len(found) > 3 else "")
    return [
        checks.Warning(
            f'TASKS["default"]["BACKEND"] is {shown}: .enqueue() of your @task functions '
            f"({examples}) runs them in the caller and tasks_app records no run.",
            hint=f'Set TASKS = {{"default": {{"BACKEND": "{BACKEND_PATH}"}}}}.',
            id=_id("W002"),
        )
    ]


@register()
def check_unknown_settings(
    app_configs: Sequence[AppConfig] | None = None,
    databases: Sequence[str] | None = None,
    **_: Any,
) -> list[CheckMessage]:
    """E004: a ``TASKS_*`` setting the app does not declare (``tasks_app.conf``) is read by
    nobody, most often a typo, and its value is silently not applied. Compared without
    the prefix for the suggestion (every name shares it). Not for ``migrate``: a name
    concerns no table."""
    from .conf import PREFIX, AppSettings

    if _for_migrate(databases):
        return []

    known = {setting.name for setting in AppSettings.declared()}
    suffixes = {name.removeprefix(PREFIX): name for name in known}
    errors: list[CheckMessage] = []
    for name in dir(settings):
        if not name.startswith(PREFIX) or name in known:
            continue
        close = difflib.get_close_matches(name.removeprefix(PREFIX), suffixes, n=1)
        guess = f"Did you mean {suffixes[close[0]]}? " if close else ""
        errors.append(
            Error(
                f"{name} is not a setting of tasks_app; its value is not used.",
                hint=f"{guess}Remove it, or use one of the app's settings "
                "(python -m tasks_app.conf lists them).",
                id=_id("E004"),
            )
        )
    return errors


@register()
def check_backend_options(
    app_configs: Sequence[AppConfig] | None = None, **_: Any
) -> list[CheckMessage]:
    """E005: an ``OPTIONS`` key of a ``TASKS`` alias whose backend is ours that the backend
    does not take (``CeleryRunBackend.supported_options``): it would be ignored."""
    errors: list[CheckMessage] = []
    for alias, params in _task_backends().items():
        cls = _backend_class(params.get("BACKEND")) if isinstance(params, dict) else None
        if cls is None:
            continue
        allowed: frozenset[str] = getattr(cls, "supported_options", frozenset())
        for key in sorted(set(params.get("OPTIONS") or {}) - allowed):
            takes = ", ".join(sorted(allowed)) if allowed else "no OPTIONS"
            close = difflib.get_close_matches(key, allowed, n=1)
            errors.append(
                Error(
                    f"TASKS[{alias!r}]['OPTIONS'] has {key!r}, which {_name(cls)} does not take.",
                    hint=(f"Did you mean {close[0]!r}? " if close else "")
                    + f"Remove it: the backend takes {takes}.",
                    id=_id("E005"),
                )
            )
    return errors


@register(Tags.urls)
def check_urls(app_configs: Sequence[AppConfig] | None = None, **_: Any) -> list[CheckMessage]:
    """W003: the app's pages (overview, API, /metrics) are reachable: ``tasks-overview``
    reverses in ``ROOT_URLCONF``."""
    if not getattr(settings, "ROOT_URLCONF", None):
        return []  # Django's own checks say it
    try:
        reverse("tasks-overview")
    except NoReverseMatch:
        return [
            checks.Warning(
                f"ROOT_URLCONF ({settings.ROOT_URLCONF}) does not include tasks_app's URLs: "
                "no overview, API or /metrics.",
                hint='Add path("", include("tasks_app.urls")) to urlpatterns in your '
                'ROOT_URLCONF, before path("admin/", admin.site.urls).',
                id=_id("W003"),
            )
        ]
    return []
