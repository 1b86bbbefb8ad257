"""``manage.py tasks``: the seed workflow with ``--json``, tables, and exit statuses."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.utils import timezone

from tasks_app import services
from tasks_app.management.cli.arguments import duration
from tasks_app.models import Run, Task, TaskAuditEntry
from tasks_app.vocabulary.display import relative
from tasks_app.worker import run_execution
from tests.processes import wait_until
from tests.shared import cli
from tests.stored_rows import run_set


def tasks(*args: str) -> object:
    out = StringIO()
    call_command("tasks", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def tasks_text(*args: str) -> str:
    out = StringIO()
    call_command("tasks", *args, stdout=out)
    return out.getvalue()


def test_durations_and_relative_times() -> None:
    assert [duration(t) for t in ("90s", "15m", "2h", "1d", "30")] == [90, 900, 7200, 86400, 30]
    now = timezone.now()
    assert relative(now + timedelta(minutes=4, seconds=1), now) == "in 4 min"
    assert relative(now - timedelta(seconds=12), now) == "12 s ago"
    assert relative(now + timedelta(hours=2), now) == "in 2 h"
    assert relative(None, now) == "-"


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_seed_workflow_with_json(worker) -> None:
    created = tasks(
        "create",
        "my-task-1",
        "--action",
        "echo",
        "--payload",
        '{"message": "hello"}',
        "--name",
        "My task",
    )
    assert (
        created["id"] == "my-task-1" and created["status"] == "created" and created["run"] is None
    )

    assert [t["id"] for t in tasks("list")] == ["my-task-1"]
    assert tasks("list", "--status", "failed") == []
    assert tasks("get", "my-task-1")["payload"] == {"message": "hello"}

    run = tasks("schedule", "my-task-1", "--in", "2s")
    assert run["status"] == "pending" and run["trigger"] == "delay"
    seen = [run["status"]]
    deadline = time.monotonic() + 20
    while seen[-1] not in ("completed", "failed") and time.monotonic() < deadline:
        status = Run.objects.get(pk=run["id"]).status
        if status != seen[-1]:
            seen.append(status)
        time.sleep(0.02)
    print("statuses seen:", seen)
    assert seen[-1] == "completed" and "queued" in seen
    done = tasks("runs", "my-task-1")[0]
    assert done["output"] == "hello"
    assert datetime.fromisoformat(done["started_at"]) >= datetime.fromisoformat(done["due_at"])

    assert tasks("update", "my-task-1", "--name", "Renamed")["name"] == "Renamed"
    now_run = tasks("execute", "my-task-1")
    assert now_run["trigger"] == "cli"
    wait_until(
        lambda: Run.objects.get(pk=now_run["id"]).status == "completed",
        timeout=20,
        message="the run to complete",
    )
    assert len(tasks("runs", "my-task-1")) == 2

    assert tasks("delete", "my-task-1") == {"id": "my-task-1", "deleted": True}
    assert not Task.objects.exists() and not Run.objects.exists()
    assert TaskAuditEntry.objects.filter(
        task_id="my-task-1", event="deleted", by__startswith="cli"
    ).exists()


@pytest.mark.django_db(transaction=True)
def test_exit_statuses_and_one_line_errors_from_the_real_command_line() -> None:
    ok = cli("create", "cli-task", "--action", "noop", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["id"] == "cli-task"

    listed = cli("list")
    assert listed.returncode == 0
    header, row = listed.stdout.splitlines()[:2]
    assert header.split() == ["ID", "NAME", "ACTION", "SCHEDULE", "STATUS", "NEXT", "RUN"]
    assert row.split()[:3] == ["cli-task", "-", "noop"]

    duplicate = cli("create", "cli-task", "--action", "noop")
    assert duplicate.returncode == 1
    assert duplicate.stderr.strip().count("\n") == 0 and "already exists" in duplicate.stderr

    refused = cli("schedule", "cli-task", "--in", "400d")
    assert refused.returncode == 1 and "delay_seconds: must be at most" in refused.stderr
    assert cli("get", "nope").returncode == 1

    assert cli("schedule", "cli-task", "--in", "soon").returncode == 2  # not a duration
    assert cli("frobnicate").returncode == 2
    assert cli("create", "x").returncode == 2  # neither --action nor --command
    assert Task.objects.count() == 1 and Run.objects.count() == 0


@pytest.mark.django_db
def test_command_shorthand_creates_an_exec_task() -> None:
    with override_settings(TASKS_EXEC_ALLOWLIST=[]):  # the default: exec is disabled
        with pytest.raises(CommandError, match="TASKS_EXEC_ALLOWLIST"):
            call_command(
                "tasks", "create", "hello-exec", "--command", "echo hello", stdout=StringIO()
            )
    assert not Task.objects.exists()
    with override_settings(TASKS_EXEC_ALLOWLIST=["echo"]):
        created = tasks("create", "hello-exec", "--command", "echo 'hello world'")
    assert created["action"] == "exec"
    assert created["payload"] == {"argv": ["echo", "hello world"]}


@pytest.mark.django_db
def test_bad_input_is_refused_and_writes_nothing() -> None:
    for args, text in [
        (("create", "t", "--action", "nope"), "unknown action"),
        (
            ("create", "t", "--action", "echo", "--payload", "{}"),
            "'message' is a required property",
        ),
        (("create", "t", "--action", "noop", "--cron", "99 * * * *"), "invalid cron"),
        (
            ("create", "t", "--action", "noop", "--cron", "0 9 * * *", "--timezone", "Mars/Base"),
            "Mars/Base",
        ),
        (("create", "t", "--action", "noop", "--at", "2001-01-01T00:00:00Z"), "in the past"),
    ]:
        with pytest.raises(CommandError) as info:
            call_command("tasks", *args, stdout=StringIO())
        assert text in str(info.value) and "\n" not in str(info.value)
    assert Task.objects.count() == 0 and Run.objects.count() == 0


@pytest.mark.django_db
def test_tables_pause_resume_preview_backfill_runs() -> None:
    services.task_create(
        id="every-5m", action="noop", schedule_type="interval", interval_seconds=300
    )
    text = tasks_text("list")
    assert "every 300 s" in text and "in 5 min" in text

    paused = tasks("pause", "every-5m", "--note", "maintenance")
    assert paused["paused"] is True and paused["pause_note"] == "maintenance"
    assert re.search(r"paused +by \S+ now: maintenance", tasks_text("get", "every-5m"))
    assert tasks("resume", "every-5m")["paused"] is False

    fires = tasks("preview", "every-5m", "--count", "3")["fires"]
    assert len(fires) == 3
    gaps = {
        (datetime.fromisoformat(b["utc"]) - datetime.fromisoformat(a["utc"])).total_seconds()
        for a, b in zip(fires, fires[1:])
    }
    assert gaps == {300.0}

    end = timezone.now() - timedelta(minutes=1)
    result = tasks(
        "backfill",
        "every-5m",
        "--start",
        (end - timedelta(minutes=30)).isoformat(),
        "--end",
        end.isoformat(),
    )
    assert result["created"] == 6 and {r["trigger"] for r in result["runs"]} == {"backfill"}
    assert len(tasks("runs", "every-5m", "--trigger", "backfill")) == 6
    table = tasks_text("runs", "every-5m")
    assert table.splitlines()[0].split()[:4] == ["RUN", "TASK", "TRIGGER", "STATUS"]

    waiting = tasks("schedule", "every-5m", "--in", "1h", "--expires-in", "10m")
    cancelled = tasks("cancel", waiting["id"])
    assert cancelled["status"] == "cancelled"
    retried = tasks("retry", waiting["id"])
    assert retried["trigger"] == "retry" and retried["attempt"] == 2
    with pytest.raises(CommandError, match="is cancelled; only pending, queued or running"):
        call_command("tasks", "cancel", waiting["id"], stdout=StringIO())


@override_settings(TASKS_RUN_RETENTION_DAYS=30, TASKS_FAILED_RUN_RETENTION_DAYS=90)
def test_prune_deletes_expired_runs_and_says_how_many(db) -> None:
    from tasks_app.models import RunStatus, Trigger

    task = services.task_create(id="pruned", action="noop", keep_runs_count=1)
    now = timezone.now()
    for age in (40, 2, 1):
        run = services.run_create(task=task, trigger=Trigger.CLI, due_at=now, now=now)
        when = now - timedelta(days=age)
        run_set(run.pk, status=RunStatus.COMPLETED, due_at=when, finished_at=when)
    assert tasks("prune")["runs"] == 2
    assert Run.objects.filter(task=task).count() == 1
    assert "deleted 0 runs and 0 task results" in tasks_text("prune")
    with pytest.raises(CommandError, match="--batch: must be a positive whole number"):
        call_command("tasks", "prune", "--batch", "0")


def test_keep_runs_options_set_the_tasks_own_retention(db) -> None:
    created = tasks(
        "create", "kept", "--action", "noop", "--keep-runs-days", "7", "--keep-runs", "50"
    )
    assert (created["keep_runs_days"], created["keep_runs_count"]) == (7, 50)
    with pytest.raises(CommandError, match="keep_runs_days"):
        call_command("tasks", "update", "kept", "--keep-runs-days", "0")


@pytest.mark.django_db
def test_execute_with_a_payload_runs_with_it_and_show_prints_it() -> None:
    services.task_create(id="hello", action="echo", payload={"message": "hi"})
    run = tasks("execute", "hello", "--payload", '{"message": "other"}')
    assert run["payload"] == {"message": "other"}  # type: ignore[index]
    shown = tasks_text("show", run["id"])  # type: ignore[index]
    assert re.search(r'^payload +\{"message": "other"\}$', shown, re.MULTILINE), shown
    assert Run.objects.get(pk=run["id"]).call_payload == {"message": "other"}  # type: ignore[index]
    with pytest.raises(CommandError, match="payload: does not fit action 'echo'"):
        tasks("execute", "hello", "--payload", '{"nope": 1}')
    assert Run.objects.count() == 1


def test_cancel_asks_a_running_run_to_stop_and_refuses_a_finished_one(db) -> None:
    from tasks_app import services
    from tests.shared import queued_run

    task = services.task_create(id="long-job", action="noop")
    run = run_execution.run_claim(run_id=str(queued_run(task).id), worker="w@host")
    assert run is not None
    assert tasks_text("cancel", str(run.id)).startswith(f"asked running run {run.id} to stop")
    shown = tasks("cancel", str(run.id))
    assert shown["status"] == "running" and shown["cancel_requested_at"] is not None
    services.run_fail(run=run, error="stopped", executor=True)
    with pytest.raises(CommandError, match="is cancelled; only pending, queued or running"):
        call_command("tasks", "cancel", str(run.id), stdout=StringIO())
