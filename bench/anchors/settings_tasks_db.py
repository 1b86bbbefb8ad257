"""django-tasks-db 0.13's ``DatabaseBackend`` on the django-tasks 0.12 backport (Django 5.2)."""

import django
from settings_common import *  # noqa: F403

INSTALLED_APPS = ["django_tasks_db"]
if django.VERSION < (6, 0):
    INSTALLED_APPS.append("django_tasks")
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
