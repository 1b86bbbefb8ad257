"""The claim says why it refused: ``claim_run`` answers one row, the run claimed or the
reason it was not (decided beside the claim's own conditions), which the service acts on
without deciding the rules again."""

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tasks_app import services, store
from tasks_app.models import OverlapPolicy, Run, RunStatus, Trigger
from tests.shared import queued_run
from tests.stored_rows import run_set

pytestmark = pytest.mark.django_db


def _claim(run_id: Any, *, overlap_checked: bool = False) -> store.Claim:
    return store.claim_run(
        run_id=run_id, worker="w@host", now=timezone.now(), overlap_checked=overlap_checked
    )


def _refused(run_id: Any, **kwargs: Any) -> str | None:
    return _claim(run_id, **kwargs).refused


def test_a_claimed_run_has_no_refusal_and_a_second_claim_finds_it_running() -> None:
    run = queued_run(services.task_create(id="claim-ok", action="noop"))
    claim = _claim(run.pk)
    assert claim.refused is None and claim.run is not None
    assert claim.run.status == RunStatus.RUNNING
    assert _refused(run.pk) == "running"


def test_a_run_that_does_not_exist_is_gone() -> None:
    assert _claim(uuid.uuid4()) == (None, "gone")


@pytest.mark.parametrize("status", [RunStatus.PENDING, RunStatus.COMPLETED, RunStatus.CANCELLED])
def test_a_run_in_another_status_is_not_queued(status: str) -> None:
    run = queued_run(services.task_create(id="claim-not-queued", action="noop"))
    run_set(run.pk, status=status)
    claim = _claim(run.pk)
    assert claim.refused == "not_queued"
    assert claim.run is not None and claim.run.status == status  # as the statement saw it


def test_a_run_past_its_deadline_is_expired() -> None:
    run = queued_run(services.task_create(id="claim-expired", action="noop"), late=30)
    run_set(run.pk, expires_at=timezone.now() - timedelta(seconds=10))
    assert _refused(run.pk) == "expired"
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED  # the caller expires it


def test_a_paused_tasks_run_is_paused_unless_a_person_asked_for_it() -> None:
    task = services.task_create(id="claim-paused", action="noop")
    manual = queued_run(task, trigger=Trigger.MANUAL)
    services.task_pause(task=task, note="")
    fire = queued_run(task, trigger=Trigger.SCHEDULE)  # queued as the pause committed
    assert _refused(fire.pk) == "paused"
    assert _refused(manual.pk) is None


def test_another_overlap_policy_is_overlap_until_the_caller_checked_it() -> None:
    task = services.task_create(
        id="claim-overlap", action="noop", overlap_policy=OverlapPolicy.SKIP
    )
    run = queued_run(task)
    assert _refused(run.pk) == "overlap"
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED
    assert _refused(run.pk, overlap_checked=True) is None


def test_the_first_failing_condition_is_the_reason() -> None:
    """A run both past its deadline and of a paused task with another overlap policy
    expires: the deadline is checked first, as the claim's service always did."""
    task = services.task_create(id="claim-order", action="noop", overlap_policy=OverlapPolicy.SKIP)
    services.task_pause(task=task, note="")
    run = queued_run(task, trigger=Trigger.SCHEDULE)
    run_set(run.pk, expires_at=timezone.now() - timedelta(seconds=1))
    assert _refused(run.pk) == "expired"
