"""``selectors.run_outcome``: a run's attempts read through indexes (its primary key and the
``first_attempt`` foreign key), never by scanning the run history."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tasks_app import selectors, services
from tasks_app.models import Run
from tests.plans import scans_priced_out
from tests.run_chains import complete, flaky_task, interrupt

pytestmark = pytest.mark.django_db


def test_the_attempts_of_a_run_are_found_through_indexes_not_a_scan() -> None:
    task = flaky_task("indexed", max_retries=0)
    run = services.task_execute(task=task)
    interrupt(interrupt(run))
    with scans_priced_out(["seqscan"]):  # a tiny table: force the planner's hand
        plan = selectors.run_attempts(run=run).explain()
    assert "Seq Scan" not in plan, plan
    assert "first_attempt_id" in plan, plan  # the foreign key's own index
    assert [r.attempt for r in selectors.run_outcome(run=run).attempts] == [1, 2, 3]


def test_the_outcome_of_a_run_deleted_since_it_was_read_is_an_error_not_a_wait() -> None:
    task = flaky_task("deleted", max_retries=0)
    run = services.task_execute(task=task)
    services.task_delete(task=task, by="test")
    with pytest.raises(Run.DoesNotExist, match=f"run {run.id} no longer exists"):
        selectors.run_outcome(run=run)


def test_the_run_read_with_its_attempts_agrees_with_the_outcome() -> None:
    """A run page reads the run, then its attempts: a run that ended in between is shown as
    it ended (``GET /api/runs/{id}`` once answered ``running`` with outcome ``completed``)."""
    task = flaky_task("in-between", max_retries=0)
    stale = Run.objects.select_related("task").get(pk=services.task_execute(task=task).pk)
    complete(stale)
    outcome = selectors.run_outcome(run=stale)
    current = outcome.current(stale)
    assert (stale.status, current.status, outcome.status) == ("pending", "completed", "completed")
    with CaptureQueriesContext(connection) as queries:
        assert current.task.action == "noop"
    assert len(queries) == 0
