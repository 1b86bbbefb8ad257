"""The task list counts its matches up to a cap and still reaches every page past it."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tasks_app.models import Task

pytestmark = pytest.mark.django_db


@pytest.fixture
def twelve_tasks() -> list[str]:
    ids = [f"paged-{i:02d}" for i in range(12)]
    Task.objects.bulk_create(Task(id=i, name=f"Paged {i}", action="noop") for i in ids)
    return ids


def test_few_matches_are_counted_exactly(api: APIClient, twelve_tasks) -> None:
    page = api.get("/api/tasks", {"search": "paged-0"}).json()
    assert (page["count"], page["count_exact"]) == (10, True)
    assert api.get("/api/tasks", {"page": 4, "page_size": 5}).status_code == 404


def test_past_the_cap_the_count_says_so_and_every_page_is_reachable(
    api: APIClient, twelve_tasks, monkeypatch
) -> None:
    from tasks_app.selectors import paging

    monkeypatch.setattr(paging, "COUNT_CAP", 4)
    first = api.get("/api/tasks", {"page_size": 5}).json()
    assert (first["count"], first["count_exact"]) == (4, False)
    seen = [t["id"] for t in first["results"]]
    url = first["next"]
    while url:
        page = api.get(url).json()
        seen += [t["id"] for t in page["results"]]
        url = page["next"]
    assert seen == twelve_tasks  # all three pages, each task once, in id order
    assert api.get("/api/tasks", {"page": 4, "page_size": 5}).status_code == 404
