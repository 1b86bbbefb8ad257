"""The admin as a product: its own header and name, its section first, "View site" to the
overview, the API docs one click away, every instant in one format to the second."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.urls import reverse

from tasks_app import services
from tasks_app.models import Task

pytestmark = pytest.mark.django_db


def test_index_has_the_product_header_its_section_first_and_the_links(operator) -> None:
    response = operator.get(reverse("admin:index"))
    page = response.content.decode()
    assert "Django administration" not in page and ">Scheduled tasks</a>" in page
    labels = [app["app_label"] for app in response.context["app_list"]]
    assert labels[0] == "tasks_app" and len(labels) > 1
    models = [m["object_name"] for m in response.context["app_list"][0]["models"]]
    assert models[:2] == ["Task", "Run"]
    assert f'<a href="{reverse("tasks-overview")}">View site</a>' in page
    # The demo's index: the overview and the API docs in its Operations module.
    assert 'id="tasks-overview-link"' in page and reverse("api-docs") in page


def test_every_admin_instant_is_to_the_second_in_utc(operator, django_user_model) -> None:
    task = services.task_create(
        id="stamped", action="noop", schedule_type="interval", interval_seconds=90
    )
    services.task_execute(task=task)
    LogEntry.objects.create(  # what a save in the admin records: the history page lists it
        user=django_user_model.objects.get(username="ops"),
        content_type=ContentType.objects.get_for_model(Task),
        object_id=task.pk,
        object_repr=task.pk,
        action_flag=CHANGE,
        change_message="Changed interval.",
    )
    pages = [
        operator.get(reverse("admin:tasks_app_task_change", args=[task.pk])),
        operator.get(reverse("admin:tasks_app_run_changelist")),
        operator.get(reverse("admin:tasks_app_task_changelist")),
        operator.get(reverse("admin:tasks_app_task_history", args=[task.pk])),
    ]
    for response in pages:
        html = response.content.decode()
        times = re.findall(r'<time class="tasks-time" datetime="([^"]+)"[^>]*>([^<]+)</time>', html)
        assert times, response.request["PATH_INFO"]
        for iso, text in times:
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC", text), text
            assert iso.endswith("+00:00")
        assert not re.search(r"[AP]\.M\.|a\.m\.|p\.m\.", html), response.request["PATH_INFO"]
