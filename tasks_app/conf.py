"""The app's settings: every ``TASKS_*`` setting, its type, its default and what it changes.

A project sets any of them in its Django settings (``TASKS_STALL_SECONDS = 90``); what it
leaves out takes the default declared here. The app reads them only through
:data:`app_settings`, without the prefix (``app_settings.STALL_SECONDS``). A value is
checked once and kept; a change through ``override_settings`` (as tests make them) is seen
at once.

Each read checks the value against the setting's type and bounds: a wrong one raises
``ImproperlyConfigured`` naming the setting and the rule (``TASKS_STALL_SECONDS must be a
number > 0, not 'soon'``); :meth:`AppSettings.check` reads them all, which the app does when
Django starts, so a bad value stops the process at once rather than failing a run later.

:func:`environ_settings` turns ``TASKS_*`` environment variables into typed values with the
same rules, for a project whose settings come from the environment (``project/settings.py``
does ``globals().update(environ_settings(os.environ))``). The settings table of
``docs/operations.md`` is written from the declarations below (``python -m tasks_app.conf``
prints it; a test compares).
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar, overload

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

PREFIX = "TASKS_"
T = TypeVar("T")

_UNSET: Any = object()


class Setting(Generic[T]):
    """One setting: read from Django's settings under ``TASKS_<NAME>``, else ``default``.

    ``shown`` is the default as the docs show it, when the value itself would not say it
    (a computed default, a large number)."""

    rule = "a value"

    def __init__(
        self,
        default: T | Callable[[], T],
        doc: str,
        *,
        shown: str | None = None,
    ) -> None:
        self.default = default
        self.doc = doc
        self.shown = shown
        self.name = ""
        self._value: Any = _UNSET  # the checked value, until a setting changes

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = PREFIX + name

    @overload
    def __get__(self, obj: None, owner: type) -> Setting[T]: ...
    @overload
    def __get__(self, obj: object, owner: type) -> T: ...
    def __get__(self, obj: object | None, owner: type) -> Setting[T] | T:
        if obj is None:
            return self
        value = self._value
        if value is _UNSET:
            raw = getattr(django_settings, self.name, _UNSET)
            value = self.default_value() if raw is _UNSET else self.clean(raw)
            self._value = value
        return value  # type: ignore[no-any-return]

    def forget(self) -> None:
        self._value = _UNSET

    def default_value(self) -> T:
        default = self.default
        return default() if callable(default) else default

    def error(self, value: Any, rule: str | None = None) -> ImproperlyConfigured:
        return ImproperlyConfigured(f"{self.name} must be {rule or self.rule}, not {value!r}")

    def clean(self, value: Any) -> T:
        """The value in its type, or ``ImproperlyConfigured`` naming the setting."""
        raise NotImplementedError

    def parse(self, text: str) -> T:
        """The value of an environment variable (a string) in the setting's type."""
        raise NotImplementedError

    def shown_default(self) -> str:
        if self.shown is not None:
            return self.shown
        return self.show(self.default_value())

    def show(self, value: T) -> str:
        return f"`{value}`"


def _plain(number: object) -> str:
    """``30`` for 30.0, ``0.2`` for 0.2, ``31536000`` for 365 days: never an exponent."""
    if isinstance(number, float) and number.is_integer():
        return str(int(number))
    return str(number)


class Number(Setting[T]):
    """A number of seconds, bytes, rows or times, with a lower (and maybe upper) bound."""

    def __init__(
        self,
        default: T,
        doc: str,
        *,
        integer: bool = False,
        low: float = 0,
        above: bool = False,
        high: float | None = None,
        shown: str | None = None,
    ) -> None:
        super().__init__(default, doc, shown=shown)
        self.integer = integer
        self.low, self.above, self.high = low, above, high
        kind = "a whole number" if integer else "a number"
        bound = f"{'>' if above else '>='} {_plain(low)}"
        if high is not None:
            bound = f"between {_plain(low)} and {_plain(high)}"
        self.rule = f"{kind} {bound}"

    def clean(self, value: Any) -> T:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(value)
        if not math.isfinite(value):  # NaN compares false with every bound
            raise self.error(value)
        if self.integer and not isinstance(value, int):
            if not float(value).is_integer():
                raise self.error(value)
            value = int(value)
        if value < self.low or (self.above and value == self.low):
            raise self.error(value)
        if self.high is not None and value > self.high:
            raise self.error(value)
        return value if self.integer else float(value)  # type: ignore[return-value]

    def parse(self, text: str) -> T:
        try:
            number: float = int(text) if self.integer else float(text)
            return self.clean(number)
        except (ValueError, ImproperlyConfigured):
            raise self.error(text) from None  # the variable's text, as the operator typed it

    def show(self, value: T) -> str:
        return f"`{_plain(value)}`"


class Flag(Setting[bool]):
    rule = "True or False"
    TRUE = frozenset({"1", "true", "yes", "on"})
    FALSE = frozenset({"0", "false", "no", "off"})

    def clean(self, value: Any) -> bool:
        if not isinstance(value, bool):
            raise self.error(value)
        return value

    def parse(self, text: str) -> bool:
        word = text.strip().lower()
        if word not in self.TRUE | self.FALSE:
            raise self.error(text, "one of 1, true, yes, on, 0, false, no, off")
        return word in self.TRUE

    def show(self, value: bool) -> str:
        return "`1`" if value else "`0`"


class Text(Setting[str]):
    rule = "a string"

    def __init__(
        self,
        default: str,
        doc: str,
        *,
        choices: tuple[str, ...] = (),
        shown: str | None = None,
    ) -> None:
        super().__init__(default, doc, shown=shown)
        self.choices = choices
        if choices:
            self.rule = " or ".join(repr(choice) for choice in choices)

    def clean(self, value: Any) -> str:
        if not isinstance(value, str):
            raise self.error(value)
        if self.choices:
            value = value.strip().lower()
            if value not in self.choices:
                raise self.error(value)
        return value

    def parse(self, text: str) -> str:
        return self.clean(text)

    def show(self, value: str) -> str:
        return f"`{value}`" if value else "empty"


class Texts(Setting[list[str]]):
    """A list of strings; a string is read as a comma-separated list (as in the environment)."""

    rule = "a list of strings (or one comma-separated string)"

    def clean(self, value: Any) -> list[str]:
        if isinstance(value, str):
            return self.parse(value)
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise self.error(value)
        return [item.strip() for item in value if item.strip()]

    def parse(self, text: str) -> list[str]:
        return self.clean([item for item in text.split(",")])

    def show(self, value: list[str]) -> str:
        return f"`{','.join(value)}`" if value else "empty"


class Networks(Texts):
    """CIDRs (``10.0.0.0/8``, ``::1/128``); a plain address is its own /32 or /128."""

    rule = "a list of networks in CIDR notation (e.g. 10.0.0.0/8)"

    def clean(self, value: Any) -> list[str]:
        items = super().clean(value)
        for item in items:
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise self.error(value, f"{self.rule}; {item!r} is not a network") from None
        return items


def default_queue() -> str:
    """Where a task without a queue of its own runs: Celery's ``task_default_queue`` as the
    project sets it (``CELERY_TASK_DEFAULT_QUEUE``), else Celery's own default, ``celery``."""
    celery_default = DeploymentSettings.DEFAULT_QUEUE.default_value()
    return str(getattr(django_settings, "CELERY_TASK_DEFAULT_QUEUE", None) or celery_default)


def _default_queues() -> list[str]:
    return [default_queue()]


DAY = 24 * 3600


class AppSettings:
    """Every setting of the app (attribute ``NAME`` ← Django setting ``TASKS_NAME``)."""

    # --- Runs and their timing ------------------------------------------------------------
    RELEASE_HORIZON_SECONDS = Number(
        5.0,
        "runs due within this are published with an ETA; later ones wait in the database "
        "and beat releases them as they come this close",
    )
    BEAT_TICK_SECONDS = Number(
        1.0,
        "how often the leading beat records fires, releases runs, sweeps and checks alarms",
        above=True,
    )
    RELEASE_INTERVAL_SECONDS = Number(
        0.2,
        "between those passes, how often the leading beat releases due runs (only that): "
        "runs reach the workers in small, even batches",
        above=True,
    )
    FIRE_AHEAD_SECONDS = Number(
        300.0,
        "the furthest ahead beat prepares a busy instant: when more fires are due soon than "
        "it can record and publish in the release horizon at its measured rate, it records "
        "them (and publishes them, with their exact ETA) as early as needed, up to this; "
        "only recurring fires, and 0 turns it off",
    )
    MISFIRE_GRACE_SECONDS = Number(
        5.0,
        "a fire recorded later than this after its instant was *missed* (the task's catch-up "
        "policy applies)",
    )
    MAX_DELAY_SECONDS = Number(
        365.0 * DAY,
        "longest delay / furthest `run_at` accepted",
        above=True,
        shown="`31536000` (365 days)",
    )
    RUN_AT_GRACE_SECONDS = Number(
        5.0,
        "how far in the past a `run_at` may be (clock skew)",
    )
    CLOCK_SYNC_SECONDS = Number(
        30.0,
        "how often each process reads the database's clock again (between readings it "
        "carries the last one forward on its monotonic clock: tasks_app.runtime.clock)",
        above=True,
    )
    CLOCK_SKEW_WARN_SECONDS = Number(
        2.0,
        "a process whose host clock is further off the database's says so (its log, "
        "`/api/health`, `/metrics`); it keeps to the database's clock meanwhile",
        above=True,
    )
    DEFAULT_TIMEOUT_SECONDS = Number(
        3600,
        "time limit of runs whose task sets none",
        integer=True,
        low=1,
    )
    OUTPUT_LIMIT_BYTES = Number(
        64 * 1024,
        "the most output a run keeps (UTF-8 bytes; the rest is cut and the run marked truncated)",
        integer=True,
        low=1,
    )
    BACKFILL_MAX_RUNS = Number(
        1000,
        "the most runs one backfill may create",
        integer=True,
        low=1,
    )
    RELEASE_BATCH = Number(1000, "rows per release batch", integer=True, low=1)
    ALARM_WEBHOOK_URL = Text(
        "",
        "POST a JSON notice here when a missed-run alarm is raised",
    )

    # --- Queues -------------------------------------------------------------------------
    QUEUES = Texts(
        _default_queues,
        "queues a task may name: the ones your workers consume (`celery worker -Q "
        "celery,reports`); any other is refused",
        shown="`CELERY_TASK_DEFAULT_QUEUE` (`celery`)",
    )
    QUEUE_TYPE = Text(
        "classic",
        "`quorum`: every queue the app declares is a RabbitMQ quorum queue, on topic "
        "exchanges, with delayed runs held by RabbitMQ (Celery's native delayed delivery); "
        "RabbitMQ only. An existing queue cannot change type in place "
        "([quorum queues](#quorum-queues))",
        choices=("classic", "quorum"),
    )
    QUEUE_DELIVERY_LIMIT = Number(
        20,
        "quorum queues only: a message is dropped after this many redeliveries "
        "(`x-delivery-limit`; its run is recovered from the runs table); keep it above "
        "`TASKS_MAX_INTERRUPTIONS` + 1",
        integer=True,
        low=1,
    )

    # --- Beat ---------------------------------------------------------------------------
    BEAT_LOCK_KEY = Number(
        0x7461736B736274,
        "the Postgres advisory lock beat replicas compete for (the holder fires and "
        "releases); give two deployments on one database different keys",
        integer=True,
        low=-(2**63),
        high=2**63 - 1,
    )
    BEAT_STOCK_CHECK_SECONDS = Number(
        1.0,
        "how often the stock path (PeriodicTasks not owned by a task) checks "
        'django-celery-beat\'s "changed" row when no stock entry is due (it is always '
        "checked right before a stock entry is sent)",
        above=True,
    )
    BEAT_LOG_TICKS = Flag(
        False,
        "log every beat tick that fired or released something",
    )

    # --- Reliability --------------------------------------------------------------------
    HEARTBEAT_SECONDS = Number(
        10.0,
        "how often a worker renews a running run's lease",
        above=True,
    )
    STALL_SECONDS = Number(
        60.0,
        "a running run whose lease is older is lost: interrupted (keep it several heartbeats long)",
        above=True,
    )
    CANCEL_CHECK_SECONDS = Number(
        1.0,
        "how often a worker process running runs looks for cancel requests on them (one "
        "query by primary key): how soon a running run's action sees that it was cancelled",
        above=True,
    )
    CANCEL_GRACE_SECONDS = Number(
        10.0,
        "a running run asked to stop whose action has not returned this long after the "
        "request is ended with its worker process (a prefork pool process; the main process "
        "replaces it) and recorded `cancelled`",
    )
    MAX_INTERRUPTIONS = Number(
        3,
        "how many times a run cut off by its worker's death (kill, OOM, deploy) runs again "
        "as a new attempt not counted against `max_retries`; the next interruption fails it",
        integer=True,
    )
    SHUTDOWN_GRACE_SECONDS = Number(
        25.0,
        "on SIGTERM or Ctrl-C a worker takes no new run and lets running ones finish this "
        "long, then hands the rest back; keep it under the platform's grace before SIGKILL",
    )
    REQUEUE_AFTER_SECONDS = Number(
        120.0,
        "a queued run this late (in an idle queue) has lost its message and is published "
        "again under the same id",
        above=True,
    )
    DB_RETRY_SECONDS = Number(
        30.0,
        "how long a worker retries recording an outcome while the database is away",
    )

    # --- Retention ----------------------------------------------------------------------
    RUN_RETENTION_DAYS = Number(
        30.0,
        "the leading beat deletes finished runs due longer ago (`0`: keep all); a task's "
        "`keep_runs_days` / `keep_runs_count` override it",
    )
    FAILED_RUN_RETENTION_DAYS = Number(
        90.0,
        "the same for failed, retrying and expired runs",
    )
    RETENTION_BATCH = Number(
        1000,
        "rows per retention delete",
        integer=True,
        low=1,
    )
    RETENTION_SHARE = Number(
        0.2,
        "the largest share of wall time the retention thread spends deleting (it sleeps "
        "after each batch accordingly)",
        low=0.01,
        high=1.0,
    )
    RETENTION_INTERVAL_SECONDS = Number(
        60.0,
        "after a retention pass that left nothing expired, the wait before the next",
        above=True,
    )

    SCHEDULES_MODULE = Text(
        "",
        "the module whose `SCHEDULES` list declares tasks in code (e.g. `shop.schedules`); "
        "`manage.py tasks sync` applies it (the release step runs it after `migrate`). "
        "Empty: no schedules are declared in code",
    )

    # --- Actions ------------------------------------------------------------------------
    HTTP_ALLOWED_NETWORKS = Networks(
        [],
        "CIDRs the `http` action may reach although private, loopback or link-local (e.g. "
        "`10.20.0.0/16,127.0.0.1/32`)",
    )
    HTTP_MAX_REDIRECTS = Number(
        5,
        "redirects the `http` action follows (each one re-checked)",
        integer=True,
    )
    COMMAND_ALLOWLIST = Texts(
        ["check", "clearsessions", "showmigrations"],
        "management commands the `command` action may run (the defaults only read state or delete "
        "expired sessions; `diffsettings` is left out on purpose: it would print the secret key "
        "and the database password into a run's output)",
    )
    EXEC_ALLOWLIST = Texts(
        [],
        "programs the `exec` action may run (names looked up on `TASKS_EXEC_PATH`, or "
        "absolute paths); empty: `exec` is disabled",
    )
    CELERY_TASKS = Texts(
        [],
        "shell-style name patterns of your Celery tasks the `celery` action may call "
        "(`myapp.tasks.*,billing.tasks.send_invoice`); empty: none",
    )
    DJANGO_TASKS = Texts(
        [],
        "shell-style patterns of the `@task` functions (dotted paths, `myapp.tasks.*`) the "
        "`django_task` action may call in a task a person writes (admin, API, CLI, declared "
        "schedules), checked before anything is imported: by the form's payload check, at save "
        "and at run; empty: none. Enqueues from code (`.enqueue()` through `CeleryRunBackend`) "
        "need no pattern",
    )
    EXEC_PATH = Text(
        "/usr/local/bin:/usr/bin:/bin",
        "where `exec` looks programs up; the only environment variable they see",
    )
    EXEC_USER = Text(
        "nobody",
        "the user `exec` programs run as when the worker runs as root (primary group only; "
        "`root` runs them as root, knowingly); ignored for a worker not running as root",
    )
    EXEC_CPU_SECONDS = Number(
        0,
        "CPU seconds an `exec` program may use (`0`: the run's timeout)",
        integer=True,
    )
    EXEC_MEMORY_BYTES = Number(
        1024**3,
        "address space of an `exec` program (`0`: no limit)",
        integer=True,
        shown="`1073741824` (1 GiB)",
    )
    EXEC_FILE_SIZE_BYTES = Number(
        64 * 1024**2,
        "largest file an `exec` program may write (`0`: no limit)",
        integer=True,
        shown="`67108864` (64 MiB)",
    )

    # --- Health and metrics -------------------------------------------------------------
    HEALTH_BEAT_MAX_AGE_SECONDS = Number(
        30.0,
        "beat counts as down when its last tick is older",
        above=True,
    )
    HEALTH_WORKER_TIMEOUT_SECONDS = Number(
        1.0,
        "how long health waits for a worker to answer a ping",
        above=True,
    )
    METRICS_TOKEN = Text(
        "",
        "`/metrics` answers `Authorization: Bearer <token>`",
    )
    METRICS_ALLOWED_NETWORKS = Networks(
        ["127.0.0.0/8", "::1/128"],
        "`/metrics` also answers callers from these networks",
    )

    # --- API ---------------------------------------------------------------------------
    API_TOKEN_DAYS = Number(
        30.0,
        "how long a token minted without `--days` (`manage.py api_token create`) or with a "
        "blank expiry (the admin's tokens page) stays valid, in days; none lives past 366",
        low=0,
        above=True,
        high=366,
    )

    # --- Admin ---------------------------------------------------------------------------
    ADMIN_BRANDING = Flag(
        False,
        'the admin site takes the product\'s name as its header and title, its "View site" '
        "opens the overview and the product's models come first on the index; off, the "
        "project's admin keeps its own (the app's pages carry their styles and links either way)",
    )

    @classmethod
    def declared(cls) -> Iterator[Setting[Any]]:
        """Every setting, in the order of declaration."""
        for value in vars(cls).values():
            if isinstance(value, Setting):
                yield value

    def check(self) -> None:
        """Read every setting: the first bad value raises ``ImproperlyConfigured``."""
        for setting in self.declared():
            setting.__get__(self, type(self))


app_settings = AppSettings()


@receiver(setting_changed)
def _forget_values(**_: Any) -> None:
    """A setting changed (``override_settings``, pytest-django's ``settings``): read every
    value again. (Without the memo, a setting left at its default cost Django's lookup an
    exception on every read, several times per run.)"""
    for setting in AppSettings.declared():
        setting.forget()


def environ_settings(environ: Mapping[str, str]) -> dict[str, Any]:
    """``{"TASKS_NAME": value}`` for each of the app's settings set in ``environ``, in its type.

    An empty variable counts as unset for a number or a flag, as empty for a string or a
    list. A value that does not parse raises ``ImproperlyConfigured`` naming the variable."""
    values: dict[str, Any] = {}
    for setting in AppSettings.declared():
        text = environ.get(setting.name)
        if text is None or (text.strip() == "" and isinstance(setting, Number | Flag)):
            continue
        values[setting.name] = setting.parse(text.strip())
    return values


class DeploymentSettings:
    """The ``TASKS_*`` environment variables a project's settings read for its deployment.

    They set Django's, django-axes', DRF's and Kombu's settings (``project/settings.py``),
    not the app's, so they are not in :class:`AppSettings` nor its table (docs/operations.md
    lists them with the deployment's variables); they are declared here so that every
    ``TASKS_*`` name is read by this one module, with the same parsing and the same
    ``ImproperlyConfigured`` message. Read them with :func:`deployment_settings`."""

    VAR_DIR = Text("", "where the embedded stack keeps its files (empty: the project's var/)")
    EMBEDDED = Flag(False, "the processes of the embedded stack (set by its launcher)")
    EXTRA_APPS = Texts([], "more Django apps to install (e.g. one that registers actions)")
    TRUSTED_PROXIES = Number(0, "reverse proxies in front of web", integer=True)
    LOGIN_FAILURE_LIMIT = Number(10, "failed logins that lock a pair out", integer=True, low=1)
    LOGIN_COOLOFF_SECONDS = Number(900.0, "how long a lockout lasts")
    BROKER_POLLING_INTERVAL = Number(0.05, "Postgres broker: idle poll interval", above=True)
    DEFAULT_QUEUE = Text("celery", "Celery's default queue (CELERY_TASK_DEFAULT_QUEUE)")
    API_RATE_USER = Text("1200/minute", "API throttle rate of a signed-in caller")
    API_RATE_ANON = Text("60/minute", "API throttle rate of an anonymous caller")

    @classmethod
    def declared(cls) -> Iterator[Setting[Any]]:
        for value in vars(cls).values():
            if isinstance(value, Setting):
                yield value


def deployment_settings(environ: Mapping[str, str]) -> dict[str, Any]:
    """``{"TRUSTED_PROXIES": 1, ...}``: each :class:`DeploymentSettings` variable from
    ``environ`` in its type (empty counts as unset), else its default."""
    values: dict[str, Any] = {}
    for setting in DeploymentSettings.declared():
        text = (environ.get(setting.name) or "").strip()
        short = setting.name.removeprefix(PREFIX)
        values[short] = setting.parse(text) if text else setting.default_value()
    return values


def settings_table() -> str:
    """The Markdown table of every setting (docs/operations.md holds it verbatim)."""
    lines = ["| setting | default | meaning |", "|---|---|---|"]
    for setting in AppSettings.declared():
        lines.append(f"| `{setting.name}` | {setting.shown_default()} | {setting.doc} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # python -m tasks_app.conf: the settings table
    print(settings_table(), end="")
