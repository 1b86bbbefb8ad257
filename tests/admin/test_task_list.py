"""The task list at any number of tasks: its count, its filters, its search, and a task's
page that lists no other task."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from tasks_app import services
from tasks_app.conf import app_settings
from tasks_app.models import Task

pytestmark = pytest.mark.django_db

LIST = "admin:tasks_app_task_changelist"


def listed(client, **params: str) -> list[str]:
    """The task ids the list shows (its rows' checkboxes)."""
    page = client.get(reverse(LIST), params).content.decode()
    return re.findall(r'name="_selected_action" value="([^"]+)"', page)


def many_tasks(prefix: str, count: int, **fields) -> None:
    """``count`` tasks written in one statement (the database gives each its state row)."""
    Task.objects.bulk_create(
        Task(id=f"{prefix}-{i:04d}", name=f"{prefix} {i}", action="noop", **fields)
        for i in range(count)
    )


def test_the_task_list_never_counts_every_task(operator, monkeypatch) -> None:
    """Many tasks: the table's estimate ("about N"); filtered: counted up to a cap."""
    from tasks_app.selectors import paging

    many_tasks("counted", 6)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE tasks_app_task")
    monkeypatch.setattr(paging, "EXACT_BELOW", 1)
    monkeypatch.setattr(paging, "COUNT_CAP", 4)
    page = operator.get(reverse(LIST)).content.decode()
    assert f"about {paging.table_estimate('tasks_app_task')} tasks" in page
    filtered = operator.get(reverse(LIST), {"action": "noop"}).content.decode()
    assert "more than 4 tasks" in filtered
    found = operator.get(reverse(LIST), {"q": "counted-0003"}).content.decode()
    assert "1 task" in found
    assert "total)" not in found  # no second count of every task beside the search's


def test_filters_offer_the_actions_and_queues_in_use_and_filter_by_them(operator, settings) -> None:
    settings.TASKS_QUEUES = [*app_settings.QUEUES, "slow"]
    services.task_create(id="greeter", action="echo", payload={"message": "hi"}, queue="slow")
    services.task_create(id="idler", action="noop")
    page = operator.get(reverse(LIST)).content.decode()
    assert 'href="?action=echo"' in page and 'href="?action=noop"' in page
    assert 'href="?action=sleep"' not in page  # registered, but no task uses it
    assert 'href="?queue=slow"' in page
    assert listed(operator, action="echo") == ["greeter"]
    assert listed(operator, queue="slow") == ["greeter"]
    assert listed(operator, schedule_type__exact="none") == ["greeter", "idler"]


def test_search_finds_a_task_by_a_fragment_of_its_id_or_a_word_of_its_name(operator) -> None:
    services.task_create(id="invoice-2024-0042", name="Monthly invoice reminder", action="noop")
    services.task_create(id="backup-nightly", name="Nightly backup", action="noop")
    assert listed(operator, q="024-004") == ["invoice-2024-0042"]
    assert listed(operator, q="INVOICE") == ["invoice-2024-0042"]
    assert listed(operator, q="nightly") == ["backup-nightly"]
    assert listed(operator, q="no-such-thing") == []


def test_the_list_sends_as_many_statements_for_ten_tasks_as_for_a_hundred(operator) -> None:
    """Its count, its filters' choices and its rows: none of them a query per task."""
    many_tasks("few", 10, schedule_type="interval", interval_seconds=60)

    def statements(**params: str) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert operator.get(reverse(LIST), params).status_code == 200
        return len(captured.captured_queries)

    pages = ({}, {"q": "few"}, {"action": "noop"}, {"state__status__exact": "created"})
    before = [statements(**p) for p in pages]
    many_tasks("more", 90, schedule_type="interval", interval_seconds=60)
    assert [statements(**p) for p in pages] == before


def test_a_task_page_lists_no_other_task_nor_beat_entry(operator) -> None:
    """No select of every task or every periodic task on a task's page, on its add form or
    on its beat entry's page: the pages stay the same size as tasks are added."""
    owned = services.task_create(
        id="owner-task", action="noop", schedule_type="interval", interval_seconds=300
    )
    every = IntervalSchedule.objects.get(every=300, period=IntervalSchedule.SECONDS)
    urls = [
        reverse("admin:tasks_app_task_change", args=[owned.pk]),
        reverse("admin:tasks_app_task_add"),
        reverse("admin:django_celery_beat_periodictask_change", args=[owned.periodic_task_id]),
    ]

    def options() -> list[int]:
        pages = [operator.get(url).content.decode() for url in urls]
        for page in pages:
            assert "other-" not in page
        return [page.count("<option") for page in pages]

    before = options()
    entries = PeriodicTask.objects.bulk_create(
        PeriodicTask(name=f"task:other-{i:03d}", task="tasks_app.execute_task", interval=every)
        for i in range(40)
    )
    Task.objects.bulk_create(
        Task(
            id=f"other-{i:03d}",
            action="noop",
            schedule_type="interval",
            interval_seconds=300,
            periodic_task=entry,
        )
        for i, entry in enumerate(entries)
    )
    assert options() == before
