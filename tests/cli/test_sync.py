"""``manage.py tasks sync``: schedules declared in code (``--plan``, ``--check``, apply), all
or nothing; a code-owned task is read-only in the API, the CLI and the admin; a definition
removed from code stops firing."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from tasks_app.beat import firing
from tasks_app.models import Run, Task, TaskAuditEntry, Trigger
from tasks_app.services.tokens import token_create
from tests.processes import ROOT, process_env, wait_until

_numbers = itertools.count()

NIGHTLY = """
    Schedule(
        "nightly",
        name="Nightly check",
        action="echo",
        payload={"message": "night"},
        schedule_type="cron",
        cron="0 3 * * *",
        timezone="Europe/Paris",
        max_retries=2,
    ),
"""
EVERY_MINUTE = """
    Schedule("every-minute", action="noop", schedule_type="interval", interval_seconds=60),
"""


Declare = Callable[..., str]


@pytest.fixture
def declare(tmp_path: Path, settings: object, monkeypatch: pytest.MonkeyPatch) -> Iterator[Declare]:
    """Write a schedules module holding ``definitions`` and point TASKS_SCHEDULES_MODULE at
    it (a new module name each time: no stale import)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # each rewrite is read afresh
    name = f"declared_schedules_{next(_numbers)}"

    def write(*definitions: str) -> str:
        sys.modules.pop(name, None)
        body = "".join(textwrap.dedent(d) for d in definitions)
        (tmp_path / f"{name}.py").write_text(
            "from datetime import UTC, datetime\n"
            "from tasks_app.schedules import Schedule\n\n"
            f"SCHEDULES = [\n{textwrap.indent(body, '    ')}]\n"
        )
        settings.TASKS_SCHEDULES_MODULE = name  # type: ignore[attr-defined]
        return name

    yield write
    sys.modules.pop(name, None)


def sync(*args: str) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("tasks", "sync", *args, stdout=out, stderr=err)
    except CommandError as exc:
        return exc.returncode, out.getvalue().rstrip("\n"), f"{err.getvalue()}{exc}"
    return 0, out.getvalue().rstrip("\n"), err.getvalue()


def state() -> list[tuple[object, ...]]:
    """Every task's definition and owner, and the beat entries: what a sync may change."""
    from django_celery_beat.models import PeriodicTask

    tasks = list(
        Task.objects.order_by("pk").values_list("pk", "cron", "declared_in", "state__status")
    )
    return [*tasks, ("beat entries", PeriodicTask.objects.count())]


pytestmark = pytest.mark.django_db


def test_plan_prints_each_field_and_writes_nothing_then_apply_creates_owned_tasks(
    declare: Declare,
) -> None:
    module = declare(NIGHTLY, EVERY_MINUTE)
    code, out, _ = sync("--plan")
    assert code == 0
    assert "create nightly\n" in out and "    cron: '0 3 * * *'\n" in out
    assert "    timezone: 'Europe/Paris'\n" in out and "    max_retries: 2\n" in out
    assert "create every-minute\n" in out and "    interval_seconds: 60\n" in out
    assert f"{module}: 2 to create, 0 to update, 0 to remove (2 declared)" in out
    assert Task.objects.count() == 0

    assert sync("--check")[0] == 1  # the database differs from the code

    code, out, _ = sync()
    assert code == 0 and f"{module}: 2 created, 0 updated, 0 removed" in out
    nightly = Task.objects.get(pk="nightly")
    assert nightly.declared_in == module
    assert (nightly.cron, nightly.timezone, nightly.max_retries) == ("0 3 * * *", "Europe/Paris", 2)
    assert nightly.state.next_run_at is not None and nightly.periodic_task is not None
    assert TaskAuditEntry.objects.filter(task_id="nightly", by="tasks sync").exists()

    assert sync("--check") == (0, f"{module}: the database matches its 2 schedules", "")
    assert sync()[1] == f"{module}: the database matches its 2 schedules"


def test_a_changed_definition_is_shown_old_to_new_and_applied(declare: Declare) -> None:
    declare(NIGHTLY)
    sync()
    declare(NIGHTLY.replace("0 3 * * *", "30 4 * * 1-5").replace("max_retries=2", "priority=7"))
    code, out, err = sync("--check")
    assert code == 1, (out, err)
    assert "update nightly\n" in out
    assert "    cron: '0 3 * * *' -> '30 4 * * 1-5'\n" in out
    assert "    max_retries: 2 -> 0\n" in out  # a field left out takes its default again
    assert "    priority: 5 -> 7\n" in out
    assert "run manage.py tasks sync" in err
    assert Task.objects.get(pk="nightly").cron == "0 3 * * *"
    sync()
    task = Task.objects.get(pk="nightly")
    assert (task.cron, task.max_retries, task.priority) == ("30 4 * * 1-5", 0, 7)


def test_a_set_with_one_bad_definition_changes_nothing_and_names_it(declare: Declare) -> None:
    declare(NIGHTLY)
    sync()
    before = state()
    declare(
        NIGHTLY.replace("0 3 * * *", "0 5 * * *"),  # a good change, held back with the rest
        EVERY_MINUTE,  # a good new one
        """
        Schedule("bad-cron", action="noop", schedule_type="cron", cron="61 * * * *"),
        Schedule("typo", action="noop", interval_second=5),
        Schedule("wrong-type", action="noop", priority="7"),
        Schedule("naive", action="noop", schedule_type="once", run_at=datetime(2030, 1, 1)),
        Schedule("every-minute", action="noop"),
        """,
    )
    code, out, err = sync()
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert any(
        line.startswith("declared_schedules_") and ": bad-cron: cron: " in line for line in lines
    )
    assert any(": typo: interval_second: unknown field" in line for line in lines)
    assert any(": wrong-type: priority: must be an integer, not str" in line for line in lines)
    assert any(": naive: run_at: must include a time zone" in line for line in lines)
    assert any(": every-minute: id: declared more than once" in line for line in lines)
    assert "5 problem(s) in the declared schedules; nothing was changed" in err
    assert state() == before
    assert sync("--plan")[0] == 1 and state() == before


def test_a_definition_the_api_would_refuse_is_refused_with_the_apis_message(
    declare: Declare,
) -> None:
    declare('Schedule("shout", action="echo", payload={"text": 1}, max_retries=1000),\n')
    code, _, err = sync()
    assert code == 1
    assert ": shout: max_retries: Ensure this value is less than or equal to 100." in err
    assert ": shout: payload: " in err and "'message' is a required property" in err
    assert not Task.objects.exists()


def test_a_module_that_cannot_be_imported_is_an_error(settings: object) -> None:
    settings.TASKS_SCHEDULES_MODULE = "no_such_schedules_module"  # type: ignore[attr-defined]
    code, _, err = sync("--check")
    assert code == 1
    assert "no_such_schedules_module: cannot import it (setting TASKS_SCHEDULES_MODULE)" in err


def test_the_shipped_module_declares_nothing() -> None:
    code, out, _ = sync("--check")
    assert (code, out) == (0, "project.schedules: the database matches its 0 schedules")


def test_a_task_made_by_hand_is_taken_over_and_a_removed_one_stops(declare: Declare) -> None:
    from tasks_app import services

    services.task_create(id="nightly", action="noop")
    module = declare(NIGHTLY, EVERY_MINUTE)
    code, out, _ = sync("--plan")
    assert "update nightly (taken over from the admin: read-only there from now on)" in out
    sync()
    assert Task.objects.get(pk="nightly").declared_in == module
    # every-minute has a run (its history); nightly never ran
    ran = Task.objects.get(pk="every-minute")
    services.task_execute(task=ran)
    declare()  # both definitions removed from code
    code, out, _ = sync("--plan")
    assert "remove every-minute (paused and handed back to the admin; its runs are kept)" in out
    assert "remove nightly (deleted; it has no runs)" in out
    sync()
    assert not Task.objects.filter(pk="nightly").exists()
    kept = Task.objects.get(pk="every-minute")
    assert kept.paused and kept.declared_in == "" and kept.runs.count() == 1
    assert "no longer declared in" in kept.state.pause_note
    assert sync("--check")[0] == 0


@pytest.fixture
def api() -> APIClient:
    user = get_user_model().objects.create_superuser("api-root", "r@example.com", "pw-1234567")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user).token}")
    return client


def test_a_code_owned_definition_is_read_only_but_operators_still_run_and_pause_it(
    declare: Declare, api: APIClient
) -> None:
    module = declare(NIGHTLY)
    sync()
    edit = api.patch("/api/tasks/nightly", {"cron": "0 4 * * *"}, format="json")
    assert edit.status_code == 409, edit.content
    assert module in edit.json()["error"] and "manage.py tasks sync" in edit.json()["error"]
    assert api.delete("/api/tasks/nightly").status_code == 409
    assert Task.objects.get(pk="nightly").cron == "0 3 * * *"

    assert api.post("/api/tasks/nightly/execute").status_code in (200, 201, 202)
    assert api.post("/api/tasks/nightly/pause", {}, format="json").status_code == 200
    assert api.post("/api/tasks/nightly/resume", {}, format="json").status_code == 200
    shown = api.get("/api/tasks/nightly").json()
    assert shown["declared_in"] == module

    with pytest.raises(CommandError, match=f"declared in {module}"):
        call_command("tasks", "update", "nightly", "--cron", "0 4 * * *", stdout=StringIO())
    with pytest.raises(CommandError, match=f"declared in {module}"):
        call_command("tasks", "delete", "nightly", stdout=StringIO())
    call_command("tasks", "pause", "nightly", stdout=StringIO())
    assert Task.objects.get(pk="nightly").paused
    assert sync("--check")[0] == 0  # pausing is not a change of the definition


def test_the_admin_names_the_module_and_offers_no_field_to_edit(declare: Declare) -> None:
    module = declare(NIGHTLY)
    sync()
    user = get_user_model().objects.create_superuser("root-admin", "a@example.com", "pw-1234567")
    client = Client()
    client.force_login(user)
    listing = client.get("/admin/tasks_app/task/").content.decode()
    assert module in listing
    page = client.get("/admin/tasks_app/task/nightly/change/")
    html = page.content.decode()
    assert f"is declared in {module}" in html
    form = page.context["adminform"].form
    assert not {"cron", "action", "payload", "schedule_type"} & set(form.fields)
    assert not page.context["has_delete_permission"]
    answer = client.post(
        "/admin/tasks_app/task/nightly/change/", {"cron": "0 4 * * *"}, follow=True
    )
    assert Task.objects.get(pk="nightly").cron == "0 3 * * *"
    said = [str(m) for m in answer.context["messages"]]
    assert not any("changed successfully" in m for m in said), said
    assert any(m.startswith("Nothing was changed") and module in m for m in said), said


@pytest.mark.django_db(transaction=True)
def test_the_real_command_exits_1_with_a_line_per_bad_definition(
    tmp_path: Path, declare: Declare
) -> None:
    module = declare(EVERY_MINUTE, 'Schedule("x y", action="nope"),\n')
    result = subprocess.run(
        [sys.executable, "manage.py", "tasks", "sync"],
        cwd=ROOT,
        env=process_env(TASKS_SCHEDULES_MODULE=module, PYTHONPATH=f"{tmp_path}:{ROOT}"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1, result
    assert f"{module}: x y: id: " in result.stderr
    assert f"{module}: x y: action: " in result.stderr
    assert not Task.objects.exists()


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_definition_removed_from_code_stops_firing(
    declare: Declare, worker: object, beat_factory: Callable[..., object]
) -> None:
    declare(
        'Schedule("tick", action="noop", schedule_type="interval", interval_seconds=1),\n',
        EVERY_MINUTE,
    )
    sync()
    beat_factory()

    def fires() -> int:
        return Run.objects.filter(
            task_id="tick", trigger=Trigger.SCHEDULE, status="completed"
        ).count()

    wait_until(lambda: fires() >= 2, timeout=30, message="two fires of the declared task")
    declare(EVERY_MINUTE)
    code, out, _ = sync()
    assert (
        code == 0 and "remove tick (paused and handed back to the admin; its runs are kept)" in out
    )
    settled = Run.objects.filter(task_id="tick").count()
    time.sleep(4)  # four more intervals
    assert Run.objects.filter(task_id="tick").count() == settled
    assert fires() >= 2  # its history is kept


# -- the set-based writes (schedules_apply's default) against the per-task services -------

MIXED = """
    Schedule("every-5m", action="noop", schedule_type="interval", interval_seconds=300,
             priority=3, max_retries=4, retry_backoff_seconds=30),
    Schedule("every-5m-too", action="noop", schedule_type="interval", interval_seconds=300,
             overlap_policy="skip", jitter_seconds=20),
    Schedule("paris-3am", name="Paris", action="echo", payload={"message": "bonjour"},
             schedule_type="cron", cron="0 3 * * *", timezone="Europe/Paris",
             catchup="all", catchup_window_seconds=7200, pause_after_failures=3),
    Schedule("ny-weekdays", action="echo", payload={"message": "hi"}, schedule_type="cron",
             cron="30 9 * * 1-5", timezone="America/New_York", overlap_policy="buffer_one",
             start_at=datetime(2030, 1, 1, tzinfo=UTC), end_at=datetime(2031, 1, 1, tzinfo=UTC),
             max_runs=10, timeout_seconds=60, expires_after_seconds=600),
    Schedule("tokyo-daily", action="noop", schedule_type="cron", cron="@daily",
             timezone="Asia/Tokyo", keep_runs_days=3, keep_runs_count=50,
             alert_after_seconds=900),
    Schedule("paris-3am-too", action="noop", schedule_type="cron", cron="0 3 * * *",
             timezone="Europe/Paris"),
    Schedule("once-next-month", action="noop", schedule_type="once",
             run_at=datetime.fromisoformat("RUN_AT")),
    Schedule("on-demand", action="noop"),
""".replace("RUN_AT", (datetime.now(UTC) + timedelta(days=30)).replace(microsecond=0).isoformat())
DROPPED = ("every-5m-too", "tokyo-daily", "on-demand")


def written() -> dict[str, object]:
    """What a sync wrote, without row ids and write times: tasks, state rows, beat entries
    (with their schedules' fields), runs, audit entries, schedule rows."""
    from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

    from tasks_app.models import TaskState

    skip = {"created_at", "updated_at", "periodic_task"}
    tasks = {
        t.pk: {f.attname: getattr(t, f.attname) for f in Task._meta.concrete_fields}
        for t in Task.objects.select_related("periodic_task")
    }
    for pk, row in tasks.items():
        row["periodic_task_id"] = Task.objects.get(pk=pk).periodic_task and f"task:{pk}"
        for name in skip:
            row.pop(name, None)
    entries = {
        e.name: (
            e.task,
            e.kwargs,
            e.args,
            e.enabled,
            e.queue,
            e.exchange,
            e.routing_key,
            e.headers,
            e.priority,
            e.description,
            e.one_off,
            e.start_time,
            e.expires,
            e.last_run_at,
            e.total_run_count,
            e.interval and (e.interval.every, e.interval.period),
            e.crontab
            and (
                e.crontab.minute,
                e.crontab.hour,
                e.crontab.day_of_month,
                e.crontab.month_of_year,
                e.crontab.day_of_week,
                str(e.crontab.timezone),
            ),
        )
        for e in PeriodicTask.objects.select_related("interval", "crontab")
    }
    states = {
        s.task_id: (
            s.status,
            s.consecutive_failures,
            s.fire_count,
            s.next_run_at is None,
            s.schedule_error,
            s.alarm_since,
            s.alarm_note,
            s.paused_at,
            s.paused_by,
            s.pause_note,
        )
        for s in TaskState.objects.all()
    }
    runs = sorted(
        (r.task_id, r.trigger, r.status, r.due_at, r.scheduled_for, r.expires_at)
        for r in Run.objects.all()
    )
    audit = sorted(
        (a.task_id, a.event, a.by, a.note, repr(sorted(a.changes.items())))
        for a in TaskAuditEntry.objects.all()
    )
    return {
        "tasks": tasks,
        "states": states,
        "entries": entries,
        "runs": runs,
        "audit": audit,
        "schedule rows": (IntervalSchedule.objects.count(), CrontabSchedule.objects.count()),
    }


def next_fires() -> dict[str, object]:
    from tasks_app.models import TaskState

    return dict(TaskState.objects.values_list("task_id", "next_run_at"))


def erase() -> None:
    from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

    Task.objects.all().delete()
    TaskAuditEntry.objects.all().delete()
    PeriodicTask.objects.all().delete()
    IntervalSchedule.objects.all().delete()
    CrontabSchedule.objects.all().delete()


def test_the_set_based_sync_writes_the_rows_the_per_task_services_write(
    declare: Declare,
) -> None:
    from django_celery_beat.models import CrontabSchedule, PeriodicTasks

    from tasks_app.models import TaskState
    from tasks_app.schedules.sync import schedules_apply, schedules_plan

    def release(*, bulk: bool) -> tuple[dict[str, object], list[dict[str, object]]]:
        # A schedule row that exists before the sync is reused, not created again.
        CrontabSchedule.objects.create(minute="0", hour="3", timezone="Europe/Paris")
        declare(MIXED)
        schedules_apply(schedules_plan(), bulk=bulk)
        first = next_fires()
        # Beat flagged one schedule; an edit clears the flag and its alarm.
        TaskState.objects.filter(pk="ny-weekdays").update(
            next_run_at=timezone.now(),
            schedule_error="no next fire",
            alarm_since=timezone.now(),
            alarm_note="flagged",
        )
        kept = [d for d in MIXED.split("    Schedule(")[1:] if d.split('"')[1] not in DROPPED]
        changed = (
            "    Schedule("
            + d.replace(
                'cron="0 3 * * *", timezone="Europe/Paris",\n             catchup',
                'cron="15 4 * * *", timezone="Europe/Paris",\n             catchup',
            )
            .replace("interval_seconds=300,\n             priority=3", "interval_seconds=600")
            .replace('overlap_policy="buffer_one"', 'overlap_policy="skip", priority=7')
            for d in kept
        )
        declare(
            *changed,
            'Schedule("added", action="noop", schedule_type="interval", interval_seconds=60),\n',
        )
        schedules_apply(schedules_plan(), bulk=bulk)
        return written(), [first, next_fires()]

    per_task, per_task_fires = release(bulk=False)
    erase()
    before = PeriodicTasks.last_change()
    bulk, bulk_fires = release(bulk=True)
    assert PeriodicTasks.last_change() != before  # beat reloads its entries

    assert bulk == per_task
    assert set(bulk["tasks"]) == {  # type: ignore[arg-type]
        "every-5m",
        "paris-3am",
        "ny-weekdays",
        "paris-3am-too",
        "once-next-month",
        "added",
    }
    assert len(bulk["entries"]) == 5  # type: ignore[arg-type]
    tasks = bulk["tasks"]
    assert tasks["paris-3am"]["cron"] == "15 4 * * *"  # type: ignore[index]
    assert tasks["every-5m"]["interval_seconds"] == 600  # type: ignore[index]
    assert bulk["states"]["ny-weekdays"][4:7] == ("", None, "")  # type: ignore[index]
    assert tasks["ny-weekdays"]["priority"] == 7  # type: ignore[index]
    # 300, 600 and 60 s; Paris 03:00 and 04:15, New York, Tokyo (rows are never deleted)
    assert bulk["schedule rows"] == (3, 4)
    assert ("tokyo-daily", "deleted", "tasks sync", "", "[]") in bulk["audit"]  # type: ignore[operator]
    # The next fires: the same cron instants; one interval after the sync for intervals.
    for fires, fires_too in zip(per_task_fires, bulk_fires, strict=True):
        assert fires.keys() == fires_too.keys()
        for task_id, fire in fires.items():
            if fire is None or task_id.startswith("every-") or task_id == "added":
                assert (fire is None) == (fires_too[task_id] is None)
                assert fire is None or abs((fires_too[task_id] - fire).total_seconds()) < 60  # type: ignore[operator]
            else:
                assert fires_too[task_id] == fire, task_id


def test_beat_fires_the_tasks_a_sync_wrote_at_their_instants(declare: Declare) -> None:
    from zoneinfo import ZoneInfo

    declare(MIXED)
    assert sync()[0] == 0
    paris = Task.objects.get(pk="paris-3am")
    due = paris.state.next_run_at
    assert due.astimezone(ZoneInfo("Europe/Paris")).time().isoformat() == "03:00:00"
    fired = firing.schedule_fire_due(now=due, lookahead=timedelta(0))
    assert {run.task_id for run in fired} >= {"paris-3am", "paris-3am-too"}
    assert all(run.scheduled_for == due for run in fired if run.task_id.startswith("paris"))
    paris.state.refresh_from_db()
    assert paris.state.next_run_at == due + timedelta(days=1) or (
        paris.state.next_run_at - due
    ) in (timedelta(hours=23), timedelta(hours=25))  # a change of daylight saving time between


def test_a_functions_policy_syncs_without_the_function_in_tasks_django_tasks(
    settings: object, declare: Declare
) -> None:
    """``function_policy`` chooses the function in code, as its enqueues do: the allow-list
    of functions people may choose is not asked (docs/django-tasks.md)."""
    settings.TASKS_DJANGO_TASKS = []  # type: ignore[attr-defined]
    settings.TASKS_SCHEDULES_MODULE = "tests.django_tasks.schedules"  # type: ignore[attr-defined]
    code, out, err = sync()
    assert code == 0, err
    task = Task.objects.get(pk="tests.django_tasks.functions.flaky")
    assert (task.max_retries, task.declared_in) == (2, "tests.django_tasks.schedules")
    # A task of another id that names a function is a person's choice: held to the setting.
    declare(
        """
        Schedule(
            "calls-add",
            action="django_task",
            payload={"task": "tests.django_tasks.functions.add"},
        ),
        """
    )
    code, out, err = sync()
    assert code == 1 and "TASKS_DJANGO_TASKS" in err
    assert not Task.objects.filter(pk="calls-add").exists()


def test_a_declared_schedule_carries_its_flow_control(declare: Declare) -> None:
    """Flow control is declared in code like any policy, and checked there like everywhere:
    a bad rate stops the sync naming the field, nothing written."""
    declare(
        """
        Schedule(
            "partner-sync", action="noop", schedule_type="interval", interval_seconds=60,
            flow_key="customer",
            concurrency_limit=2, concurrency_limit_per_key=1, rate_limit="10/s",
        ),
        """
    )
    code, out, err = sync()
    assert code == 0, err
    task = Task.objects.get(pk="partner-sync")
    assert (
        task.flow_key,
        task.concurrency_limit,
        task.concurrency_limit_per_key,
        task.rate_limit,
    ) == ("customer", 2, 1, "10/s")
    declare(
        'Schedule("partner-sync", action="noop", schedule_type="interval", '
        'interval_seconds=60, rate_limit="10 a second"),\n'
    )
    code, out, err = sync()
    assert code == 1 and "rate_limit" in err
    assert Task.objects.get(pk="partner-sync").rate_limit == "10/s"
