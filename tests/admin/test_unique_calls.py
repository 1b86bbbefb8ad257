"""Unique calls in the admin: "Run now with…" takes a unique key, a window and what a
duplicate does; the run page shows the key; the task form holds the policy."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tasks_app import services
from tasks_app.models import Run, RunStatus, Task
from tests.shared import form as task_form

pytestmark = pytest.mark.django_db


def test_run_now_with_a_key_twice_makes_one_run_and_says_so(operator) -> None:
    task = services.task_create(id="hello", action="echo", payload={"message": "hi"})
    url = reverse("admin:tasks_app_task_run_now", args=[task.pk])
    page = operator.get(reverse("admin:tasks_app_task_change", args=[task.pk])).content.decode()
    assert 'name="unique_key"' in page and 'name="on_duplicate"' in page
    posted = {"payload": '{"message": "once"}', "unique_key": "greeting-1"}
    operator.post(url, posted)
    response = operator.post(url, posted, follow=True)
    (run,) = Run.objects.filter(task=task)
    assert run.unique_key == "greeting-1"
    assert "already holds the key greeting-1" in response.content.decode()
    shown = operator.get(reverse("admin:tasks_app_run_change", args=[run.pk])).content.decode()
    assert "greeting-1" in shown
    operator.post(url, {**posted, "on_duplicate": "replace"})
    assert Run.objects.get(pk=run.pk).status == RunStatus.CANCELLED
    assert Run.objects.filter(task=task, status=RunStatus.PENDING).count() == 1


@pytest.mark.parametrize(
    ("posted", "said"),
    [
        ({"unique_key": "k" * 201}, "unique_key: must be at most 200 characters"),
        ({"unique_key": "k", "unique_for_seconds": "-1"}, "unique_for_seconds: must be between"),
        ({"unique_key": "k", "unique_for_seconds": "soon"}, "unique_for_seconds: must be a whole"),
        ({"unique_key": "k", "on_duplicate": "merge"}, "on_duplicate: must be one of"),
    ],
)
def test_bad_unique_fields_say_which_and_run_nothing(operator, posted: dict, said: str) -> None:
    task = services.task_create(id="hello", action="echo", payload={"message": "hi"})
    url = reverse("admin:tasks_app_task_run_now", args=[task.pk])
    response = operator.post(url, {"payload": '{"message": "x"}', **posted}, follow=True)
    assert said in response.content.decode()
    assert not Run.objects.filter(task=task).exists()


def test_the_task_form_holds_the_unique_policy_and_refuses_a_bad_one(operator) -> None:
    add = reverse("admin:tasks_app_task_add")
    response = operator.post(add, task_form(unique_on="two words"))
    assert response.status_code == 200
    assert "unique_on" in response.context["adminform"].form.errors
    response = operator.post(
        add, task_form(unique_on="message", unique_for_seconds="30", debounce="on")
    )
    assert response.status_code == 302
    task = Task.objects.get(pk="reminder-001")
    assert (task.unique_on, task.unique_for_seconds, task.debounce) == ("message", 30, True)
