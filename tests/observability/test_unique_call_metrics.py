"""``tasks_unique_calls_total{outcome}``: the calls deduplicated and the waiting runs
replaced, counted once each when their transaction commits."""

from __future__ import annotations

import pytest

from tasks_app import services
from tests.shared import scrape


def unique_calls(client) -> dict[str, float]:  # type: ignore[no-untyped-def]
    found = scrape(client).get("tasks_unique_calls_total", {})
    return {dict(labels)["outcome"]: value for labels, value in found.items()}


@pytest.mark.django_db(transaction=True)
def test_deduplicated_and_replaced_calls_are_counted(client) -> None:
    before = unique_calls(client)
    task = services.task_create(id="report", action="noop")
    once = {"task": task, "delay_seconds": 600, "unique_key": "k"}
    services.task_schedule_once(**once)
    services.task_schedule_once(**once)
    services.task_schedule_once(**once)
    services.task_schedule_once(**once, on_duplicate="replace")
    after = unique_calls(client)
    assert after["deduplicated"] - before.get("deduplicated", 0) == 2
    assert after["replaced"] - before.get("replaced", 0) == 1
