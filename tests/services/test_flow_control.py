"""Concurrency and rate limits at the claim (services.flow), against the real database:
what a worker's claim decides, what is held back and why, and what is let go when."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError

from tasks_app import services
from tasks_app.models import Run, RunStatus, Task
from tasks_app.runtime import clock
from tasks_app.services import flow
from tasks_app.worker.run_execution import run_claim, run_complete
from tests.shared import queued_run

pytestmark = pytest.mark.django_db(transaction=True)


def _task(task_id: str = "limited", **fields) -> Task:  # type: ignore[no-untyped-def]
    return services.task_create(id=task_id, action="echo", payload={"message": "x"}, **fields)


def _claim(run: Run) -> Run | None:
    return run_claim(run_id=str(run.pk), worker="w1")


def test_a_concurrency_limit_holds_the_run_beyond_it_until_a_slot_frees() -> None:
    task = _task(concurrency_limit=2)
    runs = [queued_run(task, late=3 - i) for i in range(3)]
    first, second = _claim(runs[0]), _claim(runs[1])
    assert first is not None and second is not None
    assert _claim(runs[2]) is None
    held = Run.objects.get(pk=runs[2].pk)
    assert (held.status, held.held) == (RunStatus.PENDING, "concurrency")
    assert services.release_due_runs() == 0  # the release does not publish a held run
    assert flow.flow_admit() == 0  # both slots still taken

    run_complete(run=first, output="done")
    assert flow.flow_admit([task.pk]) == 1
    admitted = Run.objects.get(pk=runs[2].pk)
    assert (admitted.status, admitted.held) == (RunStatus.QUEUED, "concurrency")  # its turn
    assert _claim(admitted) is not None
    assert Run.objects.get(pk=runs[2].pk).held == ""
    assert Run.objects.filter(task=task, status=RunStatus.RUNNING).count() == 2


def test_a_limit_per_key_counts_runs_of_the_same_key_only() -> None:
    task = _task(flow_key="customer", concurrency_limit_per_key=1)
    a1 = queued_run(task, payload={"message": "x", "customer": "a"}, late=3)
    b1 = queued_run(task, payload={"message": "x", "customer": "b"}, late=2)
    a2 = queued_run(task, payload={"message": "x", "customer": "a"}, late=1)
    assert _claim(a1) is not None and _claim(b1) is not None
    assert _claim(a2) is None
    assert Run.objects.get(pk=a2.pk).flow_key == "a"
    assert Run.objects.get(pk=a1.pk).flow_key == "a"


def test_held_runs_are_let_go_round_robin_between_keys() -> None:
    task = _task(flow_key="customer", concurrency_limit=1)
    now = clock.now()
    runs = []
    for key in "aaabbbccc":  # a's runs first in due order
        runs.append(queued_run(task, payload={"message": "x", "customer": key}))
    blocker = queued_run(task, payload={"message": "x", "customer": "z"}, late=10)
    assert _claim(blocker) is not None
    for run in runs:
        assert _claim(run) is None  # held: the one slot is taken
    run_complete(run=Run.objects.get(pk=blocker.pk), output="")
    order = []
    for _ in range(9):
        admitted = services.release_due_runs(now=now) or flow.flow_admit([task.pk])
        assert admitted == 1
        started = _claim(Run.objects.get(task=task, status=RunStatus.QUEUED))
        assert started is not None
        order.append(started.flow_key)
        run_complete(run=started, output="")
    assert order == list("abcabcabc")


def test_a_rate_limit_spaces_starts_and_reserves_the_next_one() -> None:
    task = _task(rate_limit="2/s")
    runs = [queued_run(task) for _ in range(3)]
    assert _claim(runs[0]) is not None
    assert _claim(runs[1]) is None
    assert _claim(runs[2]) is None
    first = Run.objects.get(pk=runs[0].pk).started_at
    held = [Run.objects.get(pk=r.pk) for r in runs[1:]]
    # Each held run reserved the next free start, half a second apart, and went out again
    # for it (within the release horizon): queued, with a message due then.
    assert [h.not_before - first for h in held] == [
        timedelta(seconds=0.5),
        timedelta(seconds=1.0),
    ]
    assert [h.status for h in held] == [RunStatus.QUEUED, RunStatus.QUEUED]
    # A message a moment early waits for the reserved start: never before it.
    started = _claim(held[0])
    assert started is not None and started.started_at >= held[0].not_before


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"concurrency_limit_per_key": 1}, "concurrency_limit_per_key"),
        ({"rate_limit_per_key": "5/m"}, "rate_limit_per_key"),
        ({"rate_limit": "10/x"}, "rate_limit"),
        ({"rate_limit": "0/s"}, "rate_limit"),
        ({"concurrency_limit": 0}, "concurrency_limit"),
        ({"flow_key": "customer id"}, "flow_key"),
    ],
)
def test_bad_flow_control_is_refused_naming_the_field(fields, field) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError) as caught:
        _task(**fields)
    assert field in caught.value.message_dict
    assert not Task.objects.exists()


def test_held_runs_are_shown_with_why_in_the_api_metrics_and_overview(client) -> None:  # type: ignore[no-untyped-def]
    """What is held back, and why: a run's ``held`` and key through the API, the
    ``tasks_runs_held`` gauge, the overview's panel."""
    from django.contrib.auth import get_user_model
    from django.urls import reverse
    from rest_framework.test import APIClient

    from tasks_app.services.tokens import token_create
    from tests.shared import scrape

    task = _task(flow_key="customer", concurrency_limit=1)
    first = queued_run(task, payload={"message": "x", "customer": "acme"}, late=2)
    second = queued_run(task, payload={"message": "x", "customer": "globex"}, late=1)
    assert _claim(first) is not None and _claim(second) is None
    staff = get_user_model().objects.create_superuser("boss", "b@example.com", "pw-not-used")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=staff).token}")
    shown = api.get(f"/api/runs/{second.pk}").json()
    assert (shown["status"], shown["held"], shown["flow_key"]) == (
        "pending",
        "concurrency",
        "globex",
    )
    assert api.get(f"/api/runs/{first.pk}").json()["flow_key"] == "acme"
    assert scrape(client)["tasks_runs_held"] == {
        (("reason", "concurrency"), ("task", "limited")): 1
    }
    client.force_login(staff)
    page = client.get(reverse("tasks-overview")).content.decode()
    assert "Held back by flow control" in page and "a free slot (concurrency limit)" in page
