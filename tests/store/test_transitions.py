"""The one table of a run's status changes (store.RUN_TRANSITIONS), as the database enforces
it: every pair of statuses tried on a stored run, whoever writes the change."""

from __future__ import annotations

import itertools

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from tasks_app import services
from tasks_app.models import FINAL_RUN_STATUSES, Run, RunStatus, Trigger
from tasks_app.store import RUN_TRANSITIONS

pytestmark = pytest.mark.django_db


def test_every_status_has_its_row_and_a_final_status_moves_nowhere() -> None:
    assert set(RUN_TRANSITIONS) == set(RunStatus.values)
    assert all(RUN_TRANSITIONS[s] == frozenset() for s in FINAL_RUN_STATUSES)
    assert all(set(targets) <= set(RunStatus.values) for targets in RUN_TRANSITIONS.values())


def test_the_database_allows_the_listed_pairs_and_refuses_every_other() -> None:
    task = services.task_create(id="walked", action="noop")
    now = timezone.now()
    allowed, refused = [], []
    for old, new in itertools.permutations(RunStatus.values, 2):
        # Inserted in ``old`` (an insert is not a change of status), then moved by plain SQL.
        run = Run.objects.create(
            task=task, trigger=Trigger.API, status=old, scheduled_for=now, due_at=now
        )
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("UPDATE tasks_app_run SET status = %s WHERE id = %s", [new, run.pk])
            allowed.append((old, new))
        except IntegrityError as exc:
            assert f"status {old} -> {new} is not an allowed transition" in str(exc)
            refused.append((old, new))
        assert Run.objects.get(pk=run.pk).status == (new if (old, new) in allowed else old)
    expected = {(old, new) for old, news in RUN_TRANSITIONS.items() for new in news}
    assert set(allowed) == expected
    assert len(allowed) + len(refused) == len(RunStatus.values) * (len(RunStatus.values) - 1)


def test_a_change_of_other_fields_of_a_finished_run_is_not_a_transition() -> None:
    task = services.task_create(id="kept", action="noop")
    now = timezone.now()
    run = Run.objects.create(
        task=task, trigger=Trigger.API, status=RunStatus.COMPLETED, scheduled_for=now, due_at=now
    )
    with connection.cursor() as cursor:  # the same status written again, and another field
        cursor.execute(
            "UPDATE tasks_app_run SET status = 'completed', output = 'kept' WHERE id = %s",
            [run.pk],
        )
    assert Run.objects.get(pk=run.pk).output == "kept"
