"""Settings of the second project: Django's defaults, the app's three steps, nothing else."""

import os

import dj_database_url

SECRET_KEY = "second-project-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["testserver"]
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
STATIC_URL = "static/"
ROOT_URLCONF = "shop.urls"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # Step 1: the app and the apps it builds on.
    "django_celery_beat",
    "django_celery_results",
    "rest_framework",
    "knox",  # the API tokens (stored as digests, with an expiry)
    "drf_spectacular",
    "tasks_app",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
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

DATABASES = {"default": dj_database_url.parse(os.environ["SHOP_DATABASE_URL"])}

# Step 3: Celery, and beat's scheduler (Step 2 is shop/urls.py).
CELERY_BROKER_URL = os.environ["SHOP_BROKER_URL"]
CELERY_RESULT_BACKEND = "django-db"
CELERY_TASK_DEFAULT_QUEUE = os.environ["SHOP_QUEUE"]
CELERY_BEAT_SCHEDULER = "tasks_app.beat.scheduler:TaskScheduler"

# One of the app's settings, set as any Django setting: a run keeps at most 10 bytes of output.
TASKS_OUTPUT_LIMIT_BYTES = 10
