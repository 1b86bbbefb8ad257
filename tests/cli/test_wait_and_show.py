"""``manage.py tasks show`` and ``tasks wait``: the id handed back answers the outcome of all
the run's attempts; ``wait`` exits 0 completed, 1 failed / expired / cancelled, 2 timed out."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from tasks_app import services
from tasks_app.models import Run
from tests.processes import ROOT, process_env, wait_until
from tests.run_chains import complete, fail, flaky_task, interrupt


def wait(*args: str) -> tuple[int, str]:
    """``tasks wait`` in-process: (exit status, stdout or the one-line error)."""
    out = StringIO()
    try:
        call_command("tasks", "wait", *args, stdout=out)
    except CommandError as exc:
        return exc.returncode, str(exc)
    return 0, out.getvalue()


@pytest.mark.django_db
def test_show_lists_every_attempt_and_the_outcome() -> None:
    task = flaky_task("flaky", max_retries=1)
    run = services.task_execute(task=task)
    second = interrupt(fail(run, "RuntimeError: disk full"))
    complete(second, worker="w2@host")

    out = StringIO()
    call_command("tasks", "show", str(run.id), "--json", stdout=out)
    body = json.loads(out.getvalue())
    assert body["id"] == str(run.id) and body["outcome"] == "completed"
    assert [a["status"] for a in body["attempts"]] == ["retrying", "interrupted", "completed"]
    assert body["attempts"][0]["error"] == "RuntimeError: disk full"

    out = StringIO()
    call_command("tasks", "show", str(run.id), stdout=out)
    text = out.getvalue()
    assert f"completed (attempt 3 of 3, run {second.id}, completed)" in text
    rows = text.split("attempts:\n", 1)[1].splitlines()
    assert rows[0].split() == ["TRY", "RUN", "STATUS", "STARTED", "FINISHED", "WORKER", "ERROR"]
    assert [r.split()[:3] for r in rows[1:]] == [
        ["1", str(run.id), "retrying"],
        ["2", str(Run.objects.get(attempt=2).id), "interrupted"],
        ["3", str(second.id), "completed"],
    ]
    assert "RuntimeError: disk full" in rows[1] and "w2@host" in rows[3]


@pytest.mark.django_db
def test_wait_exit_statuses() -> None:
    task = flaky_task("waited", max_retries=1)
    done = services.task_execute(task=task)
    complete(interrupt(done))
    assert wait(str(done.id))[0] == 0

    failed = services.task_execute(task=task)
    fail(fail(failed, "boom 1"), "ValueError: boom 2\nTraceback ...")
    status, message = wait(str(failed.id))
    assert status == 1
    assert message == f"run {failed.id} failed (attempt 2): ValueError: boom 2"

    cancelled = services.task_schedule_once(task=task, delay_seconds=3600)
    services.run_cancel(run=cancelled)
    assert wait(str(cancelled.id)) == (1, f"run {cancelled.id} cancelled (attempt 1)")

    waiting = services.task_schedule_once(task=task, delay_seconds=3600)
    started = time.monotonic()
    status, message = wait(str(waiting.id), "--timeout", "1s")
    assert status == 2
    assert 1 <= time.monotonic() - started < 5
    assert message == f"run {waiting.id}: no outcome after 1 s (attempt 1 is pending)"

    assert wait("00000000-0000-0000-0000-000000000000") == (
        1,
        "no run with id '00000000-0000-0000-0000-000000000000'",
    )


@pytest.mark.django_db(transaction=True)
def test_wait_exit_statuses_from_the_real_command_line() -> None:
    task = flaky_task("scripted", max_retries=0)
    done = services.task_execute(task=task)
    complete(done)
    waiting = services.task_schedule_once(task=task, delay_seconds=3600)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", "tasks", "wait", *args],
            cwd=ROOT,
            env=process_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )

    ok = cli(str(done.id), "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["outcome"] == "completed"
    late = cli(str(waiting.id), "--timeout", "0.5")
    assert late.returncode == 2
    assert late.stderr.strip().count("\n") == 0
    assert f"run {waiting.id}: no outcome after 0.5 s (attempt 1 is pending)" in late.stderr
    assert cli(str(waiting.id), "--timeout", "soon").returncode == 2  # usage error, at once

    # A run deleted (with its task) while waited for: exit 1 at once, not a wait for ever.
    waiter = subprocess.Popen(
        [sys.executable, "manage.py", "tasks", "wait", str(waiting.id), "--timeout", "120s"],
        cwd=ROOT,
        env=process_env(),
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(3)
    services.task_delete(task=task, by="test")
    _, stderr = waiter.communicate(timeout=60)
    assert waiter.returncode == 1, stderr
    assert f"run {waiting.id} no longer exists" in stderr or "no run with id" in stderr


@pytest.mark.django_db(transaction=True)
def test_wait_prints_the_run_as_it_ended_not_as_it_was_when_the_wait_began() -> None:
    task = flaky_task("finishing", max_retries=0)
    run = services.task_schedule_once(task=task, delay_seconds=3600)
    waiter = subprocess.Popen(
        [sys.executable, "manage.py", "tasks", "wait", str(run.id), "--json", "--timeout", "60s"],
        cwd=ROOT,
        env=process_env(PGAPPNAME="waiter"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    # The run ends once the waiter has read it and polled its attempts (still waiting).
    def waiter_polled() -> bool:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT 1 FROM pg_stat_activity"
                " WHERE application_name = 'waiter' AND query LIKE '%%first_attempt_id%%'"
            )
            return cursor.fetchone() is not None

    wait_until(waiter_polled, timeout=30, message="the waiter to poll the run's attempts")
    complete(run)
    stdout, stderr = waiter.communicate(timeout=60)
    assert waiter.returncode == 0, stderr
    body = json.loads(stdout)
    assert (body["status"], body["outcome"]) == ("completed", "completed")
    assert body["finished_at"] is not None
