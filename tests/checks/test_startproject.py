"""A project made by ``django-admin startproject`` that installs the app: ``manage.py check``
names what is missing (exit status 1, no traceback), and is clean once the lines the hints
give are added. In a fresh process with a clean environment, as a developer runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# startproject's settings, trimmed to what the check reads, with the app's lines added.
SETTINGS = """
SECRET_KEY = "django-insecure-test"
DEBUG = True
INSTALLED_APPS = {apps!r}
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
ROOT_URLCONF = "mysite.urls"
TEMPLATES = [
    {{
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {{
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        }},
    }},
]
DATABASES = {{"default": {database!r}}}
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
{extra}
"""
URLS = """
from django.contrib import admin
from django.urls import include, path

urlpatterns = [{app_urls}path("admin/", admin.site.urls)]
"""
# Celery's Django guide's celery.py, and the package's import of it (docs/install.md, step 4).
CELERY = """
from celery import Celery

app = Celery("mysite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
"""
CELERY_IMPORT = 'from .celery import app as celery_app\n\n__all__ = ["celery_app"]\n'
APPS = [
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
    "drf_spectacular_sidecar",
    "tasks_app",
]
# Never connected to: plain `check` asks no database.
POSTGRES = {"ENGINE": "django.db.backends.postgresql", "NAME": "shop", "HOST": "db.invalid"}
FIXED = """
CELERY_BEAT_SCHEDULER = "tasks_app.beat.scheduler:TaskScheduler"
TASKS = {"default": {"BACKEND": "tasks_app.django_tasks.CeleryRunBackend"}}
"""


def check(
    tmp_path: Path,
    *,
    apps: list[str] = APPS,
    database: dict[str, str] = POSTGRES,
    extra: str = FIXED,
    app_urls: bool = True,
    celery_app: bool = True,
) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "mysite"
    site.mkdir()
    (site / "celery.py").write_text(CELERY)
    (site / "__init__.py").write_text(CELERY_IMPORT if celery_app else "")
    (site / "settings.py").write_text(SETTINGS.format(apps=apps, database=database, extra=extra))
    (site / "urls.py").write_text(
        URLS.format(app_urls='path("", include("tasks_app.urls")), ' if app_urls else "")
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "PYTHONPATH": f"{tmp_path}:{ROOT}",
        "DJANGO_SETTINGS_MODULE": "mysite.settings",
    }
    return subprocess.run(
        [sys.executable, "-m", "django", "check"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_lines_the_hints_give_make_a_clean_check(tmp_path: Path) -> None:
    done = check(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


@pytest.mark.parametrize("app_urls", [False, True], ids=["admin-urls-only", "app-urls-included"])
def test_without_knox_check_names_it_instead_of_a_traceback(tmp_path: Path, app_urls: bool) -> None:
    # startproject's urls.py (the admin only), and the same with the app's URLs added.
    done = check(tmp_path, apps=[app for app in APPS if app != "knox"], app_urls=app_urls)
    output = done.stdout + done.stderr

    assert done.returncode == 1, output
    assert "Traceback" not in output and "RuntimeError" not in output
    assert "(tasks_app.E003) INSTALLED_APPS lacks 'knox', which tasks_app needs." in output
    assert 'HINT: Add "knox" to INSTALLED_APPS' in output


def test_on_sqlite_check_fails_naming_the_database_setting(tmp_path: Path) -> None:
    sqlite = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp_path / "db.sqlite3")}
    done = check(tmp_path, database=sqlite, extra="")
    output = done.stdout + done.stderr

    assert done.returncode == 1, output
    assert "Traceback" not in output
    assert "(tasks_app.E001) DATABASES['default']['ENGINE'] is 'django.db.backends.sqlite3'" in (
        output
    )
    assert 'HINT: Set DATABASES["default"]["ENGINE"] = "django.db.backends.postgresql"' in output
    # The settings startproject leaves out, each named with its line (warnings).
    assert "(tasks_app.W001) CELERY_BEAT_SCHEDULER is celery.beat:PersistentScheduler" in output


def test_without_the_celery_app_import_check_fails_naming_the_fix(tmp_path: Path) -> None:
    # celery.py written, but the project's __init__.py left as startproject made it: every
    # publish would go through Celery's default app, to another broker.
    done = check(tmp_path, celery_app=False)
    output = done.stdout + done.stderr

    assert done.returncode == 1, output
    assert "(tasks_app.E006) the project's Celery app is not loaded" in output
    assert "from .celery import app as celery_app" in output


def test_a_celery_setting_that_breaks_a_guarantee_is_named(tmp_path: Path) -> None:
    done = check(tmp_path, extra=FIXED + "CELERY_WORKER_PREFETCH_MULTIPLIER = 4\n")
    output = done.stdout + done.stderr

    assert done.returncode == 0, output  # a warning
    assert "(tasks_app.W004) CELERY_WORKER_PREFETCH_MULTIPLIER is 4, not 1" in output
