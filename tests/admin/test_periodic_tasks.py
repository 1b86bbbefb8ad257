"""Our Tasks and django-celery-beat's Periodic tasks, where they meet: the index says which to
use, the Periodic tasks list names the task that manages an entry, and an owned entry's page
says it is managed from its task."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from tasks_app import services
from tasks_app.models import Task
from tests.plans import EVERY_SCAN, plan, sent

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


LIST = "admin:django_celery_beat_periodictask_changelist"


def recurring(n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        services.task_create(
            id=f"every-{i}", action="noop", schedule_type="interval", interval_seconds=60
        )


def test_the_list_costs_the_same_queries_however_many_entries_it_shows(operator) -> None:
    """With a million recurring tasks the list shows as many entries: the task owning each
    is read in the list's own query (it was one query per row), and the task filter offers
    the Celery task names in use."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    every = IntervalSchedule.objects.create(every=5, period=IntervalSchedule.MINUTES)
    PeriodicTask.objects.create(name="my-celery-job", task="myapp.cleanup", interval=every)

    def page(**params: str) -> tuple[str, int]:
        with CaptureQueriesContext(connection) as queries:
            response = operator.get(reverse(LIST), params)
        assert response.status_code == 200
        return response.content.decode(), len(queries)

    recurring(2)
    _, few = page()
    recurring(8, start=2)
    text, many = page()
    assert many == few
    for i in range(10):
        url = reverse("admin:tasks_app_task_change", args=[f"every-{i}"])
        assert f'task <a href="{url}">every-{i}</a>' in text
    assert "?task__exact=myapp.cleanup" in text and "?task__exact=tasks_app.execute_task" in text
    mine, _ = page(task__exact="myapp.cleanup")
    assert "my-celery-job" in mine and "every-0" not in mine


def test_the_list_never_counts_every_entry(operator, monkeypatch) -> None:
    """Large: the table's estimate ("about N"); searched: counted up to a cap."""
    from django.db import connection

    from tasks_app.selectors import paging

    recurring(6)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE django_celery_beat_periodictask")
    monkeypatch.setattr(paging, "EXACT_BELOW", 1)
    monkeypatch.setattr(paging, "COUNT_CAP", 4)
    estimate = paging.table_estimate("django_celery_beat_periodictask")
    assert f"about {estimate} periodic tasks" in operator.get(reverse(LIST)).content.decode()
    searched = operator.get(reverse(LIST), {"q": "every-"}).content.decode()
    assert "more than 4 periodic tasks" in searched
    one = operator.get(reverse(LIST), {"q": "task:every-3"}).content.decode()
    assert "1 periodic task" in one


@pytest.mark.parametrize(
    ("part", "index"),
    [
        ("search by name", "tasks_app_entry_name_trgm_idx"),
        ("search by Celery task", "tasks_app_entry_task_trgm_idx"),
        ("task filter's choices", "tasks_app_entry_task_idx"),
        ("date drill-down", "tasks_app_entry_start_idx"),
    ],
)
def test_each_part_of_the_list_that_read_every_entry_can_be_served_by_an_index(
    operator, part, index
) -> None:
    """The SQL the list sends for its search, its task filter's choices and its date
    drill-down on ``start_time``: with every way of reading all the entries priced out (for
    the drill-down's earliest and latest, a table scan: they are read as index probes), the
    plan reads the index, as Postgres does on its own once the table is large."""
    recurring(3)
    params = {"search by name": {"q": "ry-1"}, "search by Celery task": {"q": "cleanup"}}
    fragments = {
        "search by name": ("LIKE", 'AS "owner_task_id"'),
        "search by Celery task": ("LIKE", 'AS "owner_task_id"'),
        "task filter's choices": ("WITH RECURSIVE",),
        "date drill-down": ('MIN("django_celery_beat_periodictask"."start_time")',),
    }[part]
    sql = sent(lambda: operator.get(reverse(LIST), params.get(part, {})), *fragments)
    priced_out = ("seqscan",) if part == "date drill-down" else EVERY_SCAN
    assert index in (found := plan(sql, priced_out)), found
