"""Our Tasks and django-celery-beat's Periodic tasks, where they meet: the index says which to
use, the Periodic tasks list names the task that manages an entry, and an owned entry's page
says it is managed from its task."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from tasks_app import services
from tasks_app.models import Task

pytestmark = pytest.mark.django_db


def test_owned_entries_are_explained_and_linked_to_their_task(operator) -> None:
    services.task_create(id="nightly", action="noop", schedule_type="interval", interval_seconds=60)
    owned = Task.objects.get(id="nightly").periodic_task
    assert owned is not None
    every = IntervalSchedule.objects.create(every=5, period=IntervalSchedule.MINUTES)
    own = PeriodicTask.objects.create(name="my-celery-job", task="myapp.cleanup", interval=every)
    task_url = reverse("admin:tasks_app_task_change", args=["nightly"])

    index = operator.get(reverse("admin:index")).content.decode()
    assert 'id="tasks-and-periodic-tasks"' in index and "managed from the task" in index

    listing = operator.get(reverse("admin:django_celery_beat_periodictask_changelist"))
    text = listing.content.decode()
    assert listing.status_code == 200 and 'id="periodic-tasks-note"' in text
    assert f'task <a href="{task_url}">nightly</a>' in text
    assert "this page" in text  # the hand-made entry is managed on these pages

    page = operator.get(reverse("admin:django_celery_beat_periodictask_change", args=[owned.pk]))
    assert page.status_code == 200
    assert 'id="periodic-task-owner"' in page.content.decode()
    assert f'<a href="{task_url}">nightly</a>' in page.content.decode()
    mine = operator.get(reverse("admin:django_celery_beat_periodictask_change", args=[own.pk]))
    assert mine.status_code == 200 and 'id="periodic-task-owner"' not in mine.content.decode()


def test_a_hand_made_entry_cannot_take_a_name_of_the_tasks_entries(operator) -> None:
    """Names beginning ``task:`` are the tasks' own: beat's stock path would not fire such
    an entry, so the page refuses the name and says why."""
    every = IntervalSchedule.objects.create(every=5, period=IntervalSchedule.MINUTES)
    add = reverse("admin:django_celery_beat_periodictask_add")
    form = {
        "name": "task:mine",
        "regtask": "",
        "task": "myapp.cleanup",
        "interval": every.pk,
        "args": "[]",
        "kwargs": "{}",
        "enabled": "on",
        "priority": "",
        "headers": "{}",
    }

    refused = operator.post(add, form)

    assert refused.status_code == 200
    assert "belong to the entries tasks own" in refused.content.decode()
    assert not PeriodicTask.objects.filter(name="task:mine").exists()
    accepted = operator.post(add, {**form, "name": "mine"})
    assert accepted.status_code == 302
    assert PeriodicTask.objects.filter(name="mine").exists()
