"""The app in a project as ``django-admin startproject`` makes it: what the project did not
set takes a default that works, and what it forgot does not break the rest of its site."""

from __future__ import annotations

import re
import sys
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.signals import setting_changed
from django.test import Client, override_settings
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.models import Task
from tasks_app.services.tokens import token_create
from tests.shared import form

pytestmark = pytest.mark.django_db


def unset(settings: Any, *names: str) -> None:
    """Settings the project leaves out, as ``startproject`` makes it (read again by the app)."""
    for name in names:
        delattr(settings, name)
        setting_changed.send(sender=type(settings), setting=name, value=None, enter=True)


def sync(*args: str) -> str:
    out = StringIO()
    call_command("tasks", "sync", *args, stdout=out)
    return out.getvalue().strip()


def test_without_celery_task_default_queue_a_task_runs_on_celerys_default_queue(
    settings: Any,
) -> None:
    unset(settings, "CELERY_TASK_DEFAULT_QUEUE", "TASKS_QUEUES")
    task = services.task_create(id="no-queue-setting", action="noop")
    assert task.queue == "celery"  # Celery's own task_default_queue


def test_without_a_schedules_module_sync_changes_nothing_and_says_why(
    settings: Any,
) -> None:
    unset(settings, "TASKS_SCHEDULES_MODULE")
    sys.modules.pop("project.schedules", None)
    services.task_create(id="made-by-hand", action="noop")
    said = "TASKS_SCHEDULES_MODULE is not set: no schedules are declared in code"
    assert sync() == said
    assert sync("--check") == said  # exit 0: nothing differs from code that declares nothing
    assert "project.schedules" not in sys.modules  # the demo's module is not read
    assert Task.objects.get(pk="made-by-hand").declared_in == ""


@override_settings(REST_FRAMEWORK={})
def test_the_api_takes_its_tokens_whatever_rest_framework_says() -> None:
    user = User.objects.create_superuser("root-user", password="not-used-here")
    anonymous = APIClient().get("/api/tasks")
    assert anonymous.status_code == 401
    assert anonymous["WWW-Authenticate"] == "Token"
    assert anonymous.json()["error"]  # the app's error shape
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user).token}")
    answered = client.get("/api/tasks")
    assert answered.status_code == 200
    assert set(answered.json()) >= {"count", "results"}  # paged by the app, not by REST_FRAMEWORK


@override_settings(ROOT_URLCONF="tests.install.urls_without_app")
def test_without_the_apps_urls_the_projects_admin_keeps_working() -> None:
    client = Client()
    assert client.get("/admin/login/").status_code == 200
    client.force_login(User.objects.create_superuser("admin-user", password="not-used-here"))
    assert client.get("/admin/").status_code == 200
    listed = client.get("/admin/tasks_app/task/")
    assert listed.status_code == 200
    assert re.search(rb"tasks_app/admin\.(\w+\.)?css", listed.content)  # the app's look
    assert b'id="api-docs-link"' not in listed.content  # no route to link to


@override_settings(ROOT_URLCONF="tests.install.urls_without_app")
def test_without_the_apps_urls_the_task_and_run_pages_answer_and_save() -> None:
    task = services.task_create(id="no-include", action="noop")
    run = services.task_execute(task=task)
    client = Client()
    client.force_login(User.objects.create_superuser("admin-user", password="not-used-here"))
    url = f"/admin/tasks_app/task/{task.pk}/change/"
    page = client.get(url)
    assert page.status_code == 200
    assert b"Overview</a>" not in page.content  # no route to link to
    saved = client.post(url, form(id=task.pk, action="noop", payload="{}", name="renamed"))
    assert saved.status_code == 302, saved.context["adminform"].form.errors
    assert Task.objects.get(pk=task.pk).name == "renamed"
    assert client.get(f"/admin/tasks_app/run/{run.pk}/change/").status_code == 200
