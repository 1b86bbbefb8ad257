"""The run list and the run page: filters, search, columns, output, error, Celery result,
attempt links, Retry and Cancel."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from django_celery_results.models import TaskResult

from tasks_app import services
from tasks_app.conf import app_settings
from tasks_app.models import Run, RunStatus, Trigger
from tasks_app.worker import run_execution
from tests.stored_rows import run_set

pytestmark = pytest.mark.django_db
LIST = "admin:tasks_app_run_changelist"


def finished(run: Run, status: str, **fields) -> Run:
    now = timezone.now()
    run_set(
        run.pk,
        status=status,
        started_at=now - timedelta(seconds=2),
        finished_at=now,
        lateness_ms=12.0,
        **fields,
    )
    run.refresh_from_db()
    return run


def listed(client, **params) -> set[str]:
    response = client.get(reverse(LIST), params)
    assert response.status_code == 200
    return {str(r.pk) for r in response.context["cl"].result_list}


def test_search_by_task_id_full_run_id_and_short_run_id(operator) -> None:
    a = services.task_execute(task=services.task_create(id="alpha", action="noop"))
    b = services.task_execute(task=services.task_create(id="beta", action="noop"))
    assert listed(operator, q="alpha") == {str(a.pk)}
    assert listed(operator, q=str(b.pk)) == {str(b.pk)}
    assert listed(operator, q=str(b.pk)[:8]) == {str(b.pk)}  # the short id the list shows


def test_filters_by_status_action_trigger_and_queue(operator, settings) -> None:
    settings.TASKS_QUEUES = [*app_settings.QUEUES, "slow"]
    echo = services.task_create(id="echoer", action="echo", payload={"message": "x"}, queue="slow")
    noop = services.task_create(id="nooper", action="noop")
    failed = finished(services.task_execute(task=echo, trigger=Trigger.ADMIN), RunStatus.FAILED)
    done = finished(services.task_execute(task=noop), RunStatus.COMPLETED)
    assert listed(operator, status__exact="failed") == {str(failed.pk)}
    assert listed(operator, task__action__exact="noop") == {str(done.pk)}
    assert listed(operator, trigger__exact="admin") == {str(failed.pk)}
    assert listed(operator, queue="slow") == {str(failed.pk)}


def test_list_shows_trigger_due_started_lateness_duration_worker(operator) -> None:
    run = finished(
        services.task_execute(task=services.task_create(id="cols", action="noop")),
        RunStatus.COMPLETED,
    )
    page = operator.get(reverse(LIST)).content.decode()
    for header in ("trigger", "due", "started", "lateness", "duration", "worker"):
        assert f">{header}</a>" in page.lower() or f">{header}</span>" in page.lower(), header
    assert "12 ms" in page and "2.00 s" in page  # ms below a second, then seconds
    assert str(run.pk)[:8] in page
    # Instants to the second, in UTC, with the ISO instant for the local-time tooltip.
    assert f">{run.due_at:%Y-%m-%d %H:%M:%S} UTC</time>" in page
    assert f'datetime="{run.started_at.isoformat()}"' in page


def test_run_page_shows_output_truncation_error_celery_result_and_attempt_links(operator) -> None:
    task = services.task_create(id="flaky", action="noop", max_retries=2)
    first = finished(
        services.task_execute(task=task),
        RunStatus.FAILED,
        error="RuntimeError: disk full\n\nTraceback (most recent call last):\n  ...",
        output="x" * 100,
        truncated=True,
    )
    second = services.run_retry(run=first)
    TaskResult.objects.create(
        task_id=str(first.pk),
        task_name="tasks_app.execute_run",
        status="SUCCESS",
        result='{"status": "failed"}',
        worker="w1@host",
    )
    page = operator.get(reverse("admin:tasks_app_run_change", args=[first.pk])).content.decode()
    assert "<pre class='tasks-output'>" + "x" * 100 in page
    assert "Truncated: only the first 64 KiB" in page
    assert "Traceback (most recent call last)" in page and "disk full" in page
    assert "w1@host" in page and "SUCCESS" in page  # the Celery result
    assert reverse("admin:tasks_app_run_change", args=[second.pk]) in page  # next attempt
    assert reverse("admin:tasks_app_task_change", args=[task.pk]) in page
    assert 'id="btn-retry"' in page and 'id="btn-cancel"' not in page
    assert "not yet</span>: <a href" in page  # the retry is still to run
    back = operator.get(reverse("admin:tasks_app_run_change", args=[second.pk])).content.decode()
    assert reverse("admin:tasks_app_run_change", args=[first.pk]) in back  # first attempt


def test_run_page_shows_the_outcome_of_all_attempts_and_lists_each(operator) -> None:
    task = services.task_create(id="retried", action="noop", max_retries=1)
    first = finished(
        services.task_execute(task=task),
        RunStatus.FAILED,
        error="RuntimeError: disk full\n\nTraceback (most recent call last):\n  ...",
        worker="w1@host",
    )
    second = finished(services.run_retry(run=first), RunStatus.COMPLETED, worker="w2@host")
    page = operator.get(reverse("admin:tasks_app_run_change", args=[first.pk])).content.decode()
    outcome = page.split("tasks-outcome", 1)[1].split("</div>", 1)[0]
    assert "tasks-completed" in outcome and "attempt 2</a> of 2" in outcome
    table = page.split("<table class='tasks-attempts'>", 1)[1].split("</table>", 1)[0]
    rows = table.split("<tr")[2:]
    assert len(rows) == 2
    assert "tasks-this-attempt" in rows[0] and "tasks-failed" in rows[0]
    assert "RuntimeError: disk full" in rows[0] and "w1@host" in rows[0]
    assert reverse("admin:tasks_app_run_change", args=[second.pk]) in rows[1]
    assert "tasks-completed" in rows[1] and "w2@host" in rows[1]


def test_cancel_and_retry_buttons_go_through_the_services(operator) -> None:
    task = services.task_create(id="later", action="noop")
    waiting = services.task_schedule_once(task=task, delay_seconds=3600)
    operator.post(reverse("admin:tasks_app_run_cancel", args=[waiting.pk]))
    waiting.refresh_from_db()
    assert waiting.status == RunStatus.CANCELLED
    response = operator.post(reverse("admin:tasks_app_run_retry", args=[waiting.pk]))
    retry = Run.objects.get(trigger=Trigger.RETRY)
    assert retry.attempt == 2 and retry.first_attempt_id == waiting.pk
    assert response["Location"] == reverse("admin:tasks_app_run_change", args=[retry.pk])
    # cancelling a finished run is a conflict, shown as a message, nothing changes
    done = finished(services.task_execute(task=task), RunStatus.COMPLETED)
    response = operator.post(reverse("admin:tasks_app_run_cancel", args=[done.pk]), follow=True)
    assert "only pending, queued or running runs can be cancelled" in response.content.decode()
    done.refresh_from_db()
    assert done.status == RunStatus.COMPLETED


def test_run_page_is_titled_as_a_run_and_list_actions_skip_what_they_cannot_do(operator) -> None:
    task = services.task_create(id="titled", action="noop")
    waiting = services.task_schedule_once(task=task, delay_seconds=3600)
    done = finished(services.task_execute(task=task), RunStatus.COMPLETED)
    page = operator.get(reverse("admin:tasks_app_run_change", args=[done.pk])).content.decode()
    assert f"<h1>Run {str(done.pk)[:8]} of task titled</h1>" in page
    assert "Change run" not in page
    assert 'id="btn-cancel"' not in page and 'id="btn-retry"' not in page  # completed: neither

    response = operator.post(
        reverse(LIST),
        {"action": "cancel", "_selected_action": [str(waiting.pk), str(done.pk)]},
        follow=True,
    )
    texts = [str(m) for m in response.context["messages"]]
    assert "1 run(s) cancelled." in texts
    assert "1 run(s) left alone: only pending, queued, running runs can be cancelled." in texts
    waiting.refresh_from_db()
    done.refresh_from_db()
    assert (waiting.status, done.status) == (RunStatus.CANCELLED, RunStatus.COMPLETED)


def test_the_run_list_never_counts_the_whole_history(operator, monkeypatch) -> None:
    """Large: the table's estimate ("about N"); filtered: counted up to a cap ("more than")."""
    from django.db import connection

    from tasks_app.selectors import paging

    task = services.task_create(id="counted-list", action="noop")
    for _ in range(6):
        finished(services.task_execute(task=task), RunStatus.FAILED)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE tasks_app_run")
    monkeypatch.setattr(paging, "EXACT_BELOW", 1)
    monkeypatch.setattr(paging, "COUNT_CAP", 4)
    page = operator.get(reverse(LIST)).content.decode()
    estimate = paging.table_estimate("tasks_app_run")
    assert f"about {estimate} runs" in page
    failed = operator.get(reverse(LIST), {"status__exact": "failed"}).content.decode()
    assert "more than 4 runs" in failed
    one = operator.get(reverse(LIST), {"q": "counted-list", "status__exact": "completed"})
    assert "0 runs" in one.content.decode()


def test_a_run_that_ends_while_its_page_is_read_shows_as_it_ended(operator, monkeypatch) -> None:
    """The page reads the run once, with its attempts: read apart, a run that completed in
    between showed ``pending`` and *Cancel* beside its outcome ``completed``."""
    from tasks_app.admin import runs as run_pages
    from tests.run_chains import complete

    task = services.task_create(id="in-between", action="noop")
    run = services.task_execute(task=task)
    read_outcome = run_pages.selectors.run_outcome

    def completed_in_between(*, run: Run):
        complete(run)
        return read_outcome(run=run)

    monkeypatch.setattr(run_pages.selectors, "run_outcome", completed_in_between)
    page = operator.get(reverse("admin:tasks_app_run_change", args=[run.pk])).content.decode()
    status = page.split("field-run_status", 1)[1].split("field-outcome", 1)[0]
    assert "tasks-completed" in status and "tasks-pending" not in status
    assert 'id="btn-cancel"' not in page and 'id="btn-retry"' not in page


def test_a_run_with_its_own_payload_shows_it_masked_and_its_queue_and_priority(operator) -> None:
    task = services.task_create(id="hello", action="echo", payload={"message": "hi"})
    own = services.task_execute(task=task, payload={"message": "just this once"})
    page = operator.get(reverse("admin:tasks_app_run_change", args=[own.pk])).content.decode()
    assert "just this once" in page
    assert f"{task.queue} / {task.priority}" in page
    plain = services.task_execute(task=task)
    page = operator.get(reverse("admin:tasks_app_run_change", args=[plain.pk])).content.decode()
    assert "the task&#x27;s" in page and "just this once" not in page


def test_an_attempt_retried_to_completion_shows_the_status_its_outcome_has(operator) -> None:
    """The first attempt's page, once its third completed: "completed", not "retrying"
    above "completed on attempt 3 of 3"."""
    from tests.run_chains import complete, fail, flaky_task

    task = flaky_task("retried-page", max_retries=2)
    first = services.task_execute(task=task)
    third = fail(fail(first, "RuntimeError: disk full"), "RuntimeError: disk full")
    complete(third)
    page = operator.get(reverse("admin:tasks_app_run_change", args=[first.pk])).content.decode()
    status = page.split("<label>Status:</label>", 1)[1].split("<label>Outcome:</label>", 1)[0]
    outcome = page.split("<label>Outcome:</label>", 1)[1].split("<label>Trigger:</label>", 1)[0]
    assert "tasks-completed" in outcome and "attempt 3</a> of 3" in outcome
    assert "tasks-completed" in status and "tasks-retrying" not in status
    assert "this attempt, 1 of 3: retrying" in status  # what the attempt itself was
    last = operator.get(reverse("admin:tasks_app_run_change", args=[third.pk])).content.decode()
    assert (
        "this attempt" not in last.split("<label>Status:</label>", 1)[1].split("<label>Outcome")[0]
    )


def test_cancel_on_a_running_run_asks_it_to_stop_and_the_page_shows_the_request(
    operator,
) -> None:
    from tests.shared import queued_run

    task = services.task_create(id="long-job", action="noop")
    running = run_execution.run_claim(run_id=str(queued_run(task).id), worker="w@host")
    assert running is not None
    page = operator.get(reverse("admin:tasks_app_run_change", args=[running.pk])).content.decode()
    assert 'id="btn-cancel"' in page
    response = operator.post(reverse("admin:tasks_app_run_cancel", args=[running.pk]), follow=True)
    texts = [str(m) for m in response.context["messages"]]
    assert f"Run {str(running.pk)[:8]} asked to stop (it ends cancelled)." in texts
    stored = Run.objects.get(pk=running.pk)
    assert stored.status == RunStatus.RUNNING and stored.cancel_requested_at is not None
    shown = response.content.decode().split("field-cancel_requested", 1)[1].split("</div>", 2)[0]
    assert stored.cancel_requested_at.strftime("%Y-%m-%d %H:%M:%S") in shown
