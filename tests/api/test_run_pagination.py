"""Run lists page by keyset (cursor): every run once across the pages, newest due first, the
next page unchanged by runs added meanwhile, and bad cursors refused naming the parameter."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from tasks_app import services
from tasks_app.models import Run, RunStatus, Trigger
from tests.shared import assert_error
from tests.stored_rows import run_set

pytestmark = pytest.mark.django_db


def finished_runs(task_id: str, count: int, *, status: str = RunStatus.COMPLETED) -> list[Run]:
    task = services.task_create(id=task_id, action="noop")
    now = timezone.now()
    runs = []
    for i in range(count):
        run = services.run_create(
            task=task, trigger=Trigger.API, due_at=now + timedelta(hours=1), now=now
        )
        # Two runs share each due instant: the id breaks the tie.
        due = now - timedelta(minutes=i // 2)
        run_set(run.pk, status=status, due_at=due, finished_at=due)
        runs.append(Run.objects.get(pk=run.pk))
    return runs


def walk(api: APIClient, url: str, **params: object) -> list[list[str]]:
    pages = []
    body = api.get(url, params).json()
    while True:
        assert set(body) == {"next", "previous", "results"}
        pages.append([r["id"] for r in body["results"]])
        if not body["next"]:
            return pages
        body = api.get(body["next"]).json()


def test_pages_cover_every_run_once_newest_due_first(api: APIClient) -> None:
    runs = finished_runs("paged", 11)
    pages = walk(api, "/api/runs", page_size=4)
    assert [len(p) for p in pages] == [4, 4, 3]
    expected = sorted(runs, key=lambda r: (r.due_at, r.pk), reverse=True)
    assert [i for page in pages for i in page] == [str(r.pk) for r in expected]


def test_the_next_page_is_not_shifted_by_runs_added_meanwhile(api: APIClient) -> None:
    finished_runs("steady", 6)
    first = api.get("/api/runs", {"page_size": 3}).json()
    second_before = [r["id"] for r in api.get(first["next"]).json()["results"]]
    finished_runs("newcomer", 2)  # due now: newer than everything listed
    assert [r["id"] for r in api.get(first["next"]).json()["results"]] == second_before


def test_a_tasks_runs_and_dead_runs_page_the_same_way(api: APIClient) -> None:
    finished_runs("mine", 5)
    failed = finished_runs("broken", 3, status=RunStatus.FAILED)
    assert [len(p) for p in walk(api, "/api/tasks/mine/runs", page_size=2)] == [2, 2, 1]
    dead = [i for p in walk(api, "/api/runs/dead", page_size=2) for i in p]
    assert sorted(dead) == sorted(str(r.pk) for r in failed)


def test_bad_page_page_size_and_cursor_are_400_naming_them_a_foreign_cursor_404(
    api: APIClient,
) -> None:
    finished_runs("x", 1)
    body = assert_error(api.get("/api/runs", {"cursor": "bz1hYmM="}), 404)  # "o=abc"
    assert "cursor" in body["error"]
    assert_error(api.get("/api/runs", {"cursor": "not a cursor!"}), 400, "cursor")
    assert_error(api.get("/api/runs", {"page": 2}), 400, "page")
    assert_error(api.get("/api/tasks/x/runs", {"page_size": 0}), 400, "page_size")
    assert_error(api.get("/api/runs/dead", {"page_size": 501}), 400, "page_size")
