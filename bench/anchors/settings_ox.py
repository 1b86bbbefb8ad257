"""django-ox 1.9's ``OxBackend`` (Django 6.0, core ``django.tasks``), package defaults."""

from settings_common import *  # noqa: F403

INSTALLED_APPS = ["django_ox"]
TASKS = {"default": {"BACKEND": "django_ox.backend.OxBackend"}}
