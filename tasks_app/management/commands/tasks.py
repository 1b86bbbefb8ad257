"""``manage.py tasks <verb>``: the task system from a shell. Reference: docs/cli.md.

Each verb parses its arguments, calls one service (or selector), and prints either an
aligned table with relative times or, with ``--json``, the same JSON the REST API returns.
Exit status: 0 on success; 1 with a one-line message on stderr when the system refuses
(validation, conflict, not found, permission); 2 for usage errors (argparse). ``wait`` exits
with the run's outcome: 0 completed, 1 failed / expired / cancelled / skipped, 2 timed out.

Who acts: whoever can run ``manage.py`` holds the database credentials and the secret key,
so by default the CLI is a trusted operator (every permission; the audit trail records
``cli:<login name>``). ``--as USER`` acts as that Django user instead: each verb is the
operation of the same name in ``tasks_app.permissions.OPERATION_PERMISSIONS`` (``runs ID``:
``task_runs``), checked before anything is read, and the services check the user again
(the task's action, a run created by a change), exactly as for the admin and the API.
"""

from __future__ import annotations

import argparse
import getpass
import json
import re
import shlex
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from tasks_app import permissions, secret_fields, selectors, services, validation
from tasks_app.conf import app_settings
from tasks_app.display import duration as display_duration
from tasks_app.display import relative, schedule_brief
from tasks_app.models import Run, RunStatus, ScheduleType, Task, TaskStatus, Trigger
from tasks_app.observability.logs import quiet_console
from tasks_app.representations import (
    RunDetailSerializer,
    RunOutputSerializer,
    TaskCreatedSerializer,
    TaskOutputSerializer,
)
from tasks_app.schedules import sync as declared

DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d)?\s*$", re.IGNORECASE)
MAX_LIMIT = 10_000  # rows a list prints at most
WAIT_POLL_SECONDS = 0.5  # how often ``tasks wait`` reads the run's outcome
UNIT_SECONDS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, None: 1}


# -- argument types (a bad value is a usage error: exit status 2) -------------------------


def duration(text: str) -> float:
    """``90s``, ``15m``, ``2h``, ``1d`` or plain seconds."""
    match = DURATION.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 90s, 15m, 2h or 1d")
    unit = match.group(2).lower() if match.group(2) else None
    return float(match.group(1)) * UNIT_SECONDS[unit]


def instant(text: str) -> datetime:
    """ISO 8601 with an offset (``2025-06-01T09:00:00+02:00`` or ``...Z``)."""
    try:
        value = parse_datetime(text.strip())
    except ValueError:
        value = None
    if value is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 date-time")
    if timezone.is_naive(value):
        raise argparse.ArgumentTypeError(f"{text!r} {validation.NAIVE_INSTANT}")
    return value


def json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from exc
    except RecursionError:
        raise argparse.ArgumentTypeError(validation.TOO_DEEP) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An integer option within ``[low, high]`` (a ``--limit`` of 10**30 is a usage error,
    not a database error)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(validation.between(low, high))
        return value

    return parse


def argv(text: str) -> list[str]:
    try:
        parts = shlex.split(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"cannot split {text!r}: {exc}") from exc
    if not parts:
        raise argparse.ArgumentTypeError("the command is empty")
    return parts


# -- output --------------------------------------------------------------------------------


def table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    widths = [
        max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
        for i, h in enumerate(headers)
    ]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += [
        "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
    return "\n".join(lines)


def one_line(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        if hasattr(exc, "error_dict"):
            parts = [f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items()]
            return "; ".join(parts).replace("__all__: ", "")
        return " ".join(exc.messages)
    return " ".join(str(exc).split())


class Command(BaseCommand):
    help = "Create, list, run, schedule, pause and inspect tasks and runs (see docs/cli.md)."
    # Django's system checks (models, URLs, admin) took ~0.45 s of each call's ~1.1 s; they
    # run at release (migrate) and with manage.py check, as for Django's own changepassword.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        common = CommandParser(add_help=False)
        common.add_argument("--json", action="store_true", help="print JSON (as the REST API does)")
        common.add_argument(
            "--as",
            dest="as_user",
            metavar="USER",
            help="act as this Django user, with their permissions (default: a trusted operator)",
        )
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

        def verb(name: str, text: str) -> CommandParser:
            return verbs.add_parser(name, help=text, description=text, parents=[common])  # type: ignore[no-any-return]

        def task_fields(p: CommandParser, *, creating: bool) -> None:
            what = p.add_mutually_exclusive_group(required=creating)
            what.add_argument("--action", help="a registered action (see GET /api/actions)")
            what.add_argument(
                "--command",
                type=argv,
                metavar="'PROGRAM ARGS'",
                help='shorthand for --action exec with payload {"argv": [...]} (split like a shell, run without one)',
            )
            p.add_argument(
                "--payload", type=json_object, help="the action's payload, a JSON object"
            )
            p.add_argument("--name")
            p.add_argument("--description")
            p.add_argument("--queue")
            p.add_argument("--priority", type=int, help=validation.priority_text())
            p.add_argument("--max-retries", type=int)
            p.add_argument("--timeout", type=duration, help="per-run time limit (90s, 15m, 2h)")
            p.add_argument(
                "--expires-after",
                type=duration,
                help="a run that could not start this long after its due time expires",
            )
            p.add_argument(
                "--keep-runs-days",
                type=int,
                metavar="DAYS",
                help="delete this task's finished runs after DAYS (instead of the global days)",
            )
            p.add_argument(
                "--keep-runs", type=int, metavar="N", help="keep at most N finished runs"
            )
            recurring = p.add_mutually_exclusive_group()
            recurring.add_argument("--every", type=duration, help="interval schedule (30s, 5m, 1h)")
            recurring.add_argument("--cron", help="cron schedule, 5 fields ('0 9 * * 1-5')")
            recurring.add_argument("--on-demand", action="store_true", help="remove the schedule")
            p.add_argument("--timezone", help="IANA time zone for --cron (default UTC)")

        def one_off(p: CommandParser, *, required: bool) -> None:
            when = p.add_mutually_exclusive_group(required=required)
            when.add_argument(
                "--in",
                dest="delay",
                type=duration,
                metavar="DURATION",
                help="one run after 90s, 15m, 2h or 1d",
            )
            when.add_argument(
                "--at", type=instant, metavar="ISO-8601", help="one run at this instant"
            )
            p.add_argument(
                "--expires-in",
                type=duration,
                metavar="DURATION",
                help="the one run expires if not started this long after its due time",
            )

        p = verb("create", "create a task")
        p.add_argument("id", nargs="?", help="task id (slug characters); generated when omitted")
        task_fields(p, creating=True)
        one_off(p, required=False)

        p = verb("list", "list tasks")
        p.add_argument(
            "--status", action="append", choices=TaskStatus.values, help="repeat for several"
        )
        p.add_argument("--action")
        p.add_argument("--schedule-type", action="append", choices=ScheduleType.values)
        p.add_argument("--search", help="in id and name")
        p.add_argument("--limit", type=bounded_int(1, MAX_LIMIT), default=100)

        verb("get", "show a task, its next fires and recent runs").add_argument("id")

        p = verb("update", "change some fields of a task")
        p.add_argument("id")
        task_fields(p, creating=False)

        verb("delete", "delete a task, its schedule and its runs").add_argument("id")
        verb("execute", "run a task now").add_argument("id")

        p = verb("schedule", "one run later (--in/--at) or a recurring schedule (--every/--cron)")
        p.add_argument("id")
        when = p.add_mutually_exclusive_group(required=True)
        when.add_argument("--in", dest="delay", type=duration, metavar="DURATION")
        when.add_argument("--at", type=instant, metavar="ISO-8601")
        when.add_argument("--every", type=duration, metavar="DURATION")
        when.add_argument("--cron", metavar="EXPR")
        p.add_argument("--timezone", help="IANA time zone for --cron")
        p.add_argument("--expires-in", type=duration, metavar="DURATION")

        p = verb("pause", "pause a task (no new fires; delayed runs wait)")
        p.add_argument("id")
        p.add_argument("--note", default="")
        verb("resume", "resume a paused task").add_argument("id")

        p = verb("runs", "list runs (of one task, or all)")
        p.add_argument("id", nargs="?", help="only this task's runs")
        p.add_argument(
            "--status", action="append", choices=RunStatus.values, help="repeat for several"
        )
        p.add_argument("--trigger", action="append", choices=Trigger.values)
        p.add_argument(
            "--dead", action="store_true", help="only failed (after retries) and expired runs"
        )
        p.add_argument("--limit", type=bounded_int(1, MAX_LIMIT), default=50)

        verb("show", "show a run: its outcome and every attempt").add_argument("run_id")

        p = verb(
            "wait",
            "wait for a run's outcome: exit 0 completed, 1 failed, expired, cancelled or "
            "skipped, 2 timed out",
        )
        p.add_argument("run_id")
        p.add_argument(
            "--timeout",
            type=duration,
            metavar="DURATION",
            help="give up after this long (exit 2); default: wait as long as it takes",
        )

        verb("cancel", "cancel a pending or queued run").add_argument("run_id")
        verb("retry", "retry a failed, expired or cancelled run").add_argument("run_id")

        p = verb("backfill", "one run for each fire of the schedule in (start, end]")
        p.add_argument("id")
        p.add_argument("--start", type=instant, required=True, metavar="ISO-8601")
        p.add_argument("--end", type=instant, required=True, metavar="ISO-8601")

        p = verb(
            "prune",
            "delete expired runs now (retention; the leading beat does it continuously)",
        )
        p.add_argument(
            "--batch", type=int, metavar="N", help="rows per delete (TASKS_RETENTION_BATCH)"
        )

        text = "make the tasks match the schedules declared in code (TASKS_SCHEDULES_MODULE)"
        p = verbs.add_parser("sync", help=text, description=text)
        p.add_argument("--json", action="store_true", help="print the plan as JSON")
        mode = p.add_mutually_exclusive_group()
        mode.add_argument(
            "--plan", action="store_true", help="print the difference field by field; write nothing"
        )
        mode.add_argument(
            "--check",
            action="store_true",
            help="exit 1 while the database differs from the code (for CI); write nothing",
        )

        p = verb("preview", "the next fire times of a task's schedule")
        p.add_argument("id")
        p.add_argument("--count", type=bounded_int(1, selectors.MAX_PREVIEW), default=5)

    # -- dispatch -----------------------------------------------------------------------

    def handle(self, *args: Any, **options: Any) -> None:
        quiet_console(options["verbosity"])
        self.as_json = bool(options.get("json"))
        self.now = timezone.now()
        verb = options["verb"]
        operation = "task_runs" if verb == "runs" and options.get("id") else verb
        self.user = self.acting_user(options.get("as_user"), operation)
        handler: Callable[[dict[str, Any]], None] = getattr(self, f"do_{options['verb']}")
        try:
            handler(options)
        except CommandError:
            raise
        except (permissions.ActionNotPermitted, permissions.OperationNotPermitted) as exc:
            raise CommandError(f"permission denied: {exc}", returncode=1) from exc
        except (ValidationError, services.ConflictError, LookupError, Run.DoesNotExist) as exc:
            raise CommandError(one_line(exc), returncode=1) from exc

    def acting_user(self, username: str | None, operation: str) -> Any:
        """The Django user of ``--as`` (refused unless active and holding the model
        permissions of the verb's operation), or ``None``: the trusted operator."""
        if username is None:
            return None
        model = get_user_model()
        user = model._default_manager.filter(**{model.USERNAME_FIELD: username}).first()
        if user is None or not user.is_active:
            raise CommandError(f"--as: no active user {username!r}", returncode=1)
        try:
            permissions.authorize(user, operation)
        except permissions.OperationNotPermitted as exc:
            raise CommandError(f"permission denied: {exc}", returncode=1) from exc
        return user

    @property
    def by(self) -> Any:
        """Who acts, for the services: the ``--as`` user (checked there) or the operator's
        name (trusted)."""
        if self.user is not None:
            return self.user
        try:
            return f"cli:{getpass.getuser()}"
        except (KeyError, OSError):
            return "cli"

    def out(self, data: Any, text: str) -> None:
        self.stdout.write(json.dumps(data, indent=2, default=str) if self.as_json else text)

    def task(self, task_id: str) -> Task:
        task = Task.objects.filter(pk=task_id).first()
        if task is None:
            raise CommandError(f"no task with id {task_id!r}", returncode=1)
        return task

    def run(self, run_id: str) -> Run:
        run = (
            Run.objects.select_related("task").filter(pk=run_id).first()
            if _is_uuid(run_id)
            else None
        )
        if run is None:
            raise CommandError(f"no run with id {run_id!r}", returncode=1)
        return run

    def fields(self, options: dict[str, Any]) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if options.get("command"):
            data["action"] = "exec"
            data["payload"] = {"argv": options["command"]}
            if options.get("payload"):
                raise CommandError("give --command or --payload, not both", returncode=2)
        elif options.get("action"):
            data["action"] = options["action"]
        if options.get("payload") is not None:
            data["payload"] = options["payload"]
        for option, field in (
            ("name", "name"),
            ("description", "description"),
            ("queue", "queue"),
            ("priority", "priority"),
            ("max_retries", "max_retries"),
            ("keep_runs_days", "keep_runs_days"),
            ("keep_runs", "keep_runs_count"),
        ):
            if options.get(option) is not None:
                data[field] = options[option]
        for option, field in (
            ("timeout", "timeout_seconds"),
            ("expires_after", "expires_after_seconds"),
        ):
            if options.get(option) is not None:
                data[field] = _whole_seconds(options[option], option)
        data.update(self.recurring(options))
        return data

    def recurring(self, options: dict[str, Any]) -> dict[str, Any]:
        if options.get("every") is not None:
            return {
                "schedule_type": "interval",
                "interval_seconds": _whole_seconds(options["every"], "every"),
            }
        if options.get("cron"):
            return {
                "schedule_type": "cron",
                "cron": options["cron"],
                "timezone": options.get("timezone") or "UTC",
            }
        if options.get("on_demand"):
            return {"schedule_type": "none"}
        if options.get("timezone"):
            return {"timezone": options["timezone"]}
        return {}

    # -- verbs --------------------------------------------------------------------------

    def do_create(self, o: dict[str, Any]) -> None:
        fields = self.fields(o)
        task, run = services.task_create_with_run(
            id=o.get("id"),
            by=self.by,
            fields=fields,
            delay_seconds=o.get("delay"),
            run_at=o.get("at"),
            expires_in_seconds=o.get("expires_in"),
        )
        text = f"created task {task.id}"
        if run is not None:
            text += f"; run {run.id} due {relative(run.due_at, self.now)}"
        self.out(TaskCreatedSerializer(task, context={"run": run}).data, text)

    def do_list(self, o: dict[str, Any]) -> None:
        found = selectors.task_list(
            status=o["status"],
            action=o["action"],
            schedule_type=o["schedule_type"],
            search=o["search"],
        )
        tasks = list(found[: max(o["limit"], 0)])
        rows = [
            [
                t.id,
                t.name or "-",
                t.action,
                schedule_brief(t),
                t.state.status,
                self.next_run(t, short=True),
            ]
            for t in tasks
        ]
        self.out(
            TaskOutputSerializer(tasks, many=True).data,
            table(rows, ["ID", "NAME", "ACTION", "SCHEDULE", "STATUS", "NEXT RUN"]),
        )

    def next_run(self, task: Task, *, short: bool = False) -> str:
        """The task's next run as the admin and the API show it (none while paused)."""
        if task.paused:
            return selectors.NEXT_RUN_PAUSED_SHORT if short else selectors.NEXT_RUN_PAUSED
        at = selectors.task_next_run_at(task)
        if short or at is None:
            return relative(at, self.now)
        return f"{relative(at, self.now)} ({at.isoformat()})"

    def do_get(self, o: dict[str, Any]) -> None:
        task = self.task(o["id"])
        runs = list(task.runs.select_related("task").order_by("-due_at")[:5])
        lines = [
            ("id", task.id),
            ("name", task.name or "-"),
            ("action", task.action),
            ("payload", json.dumps(secret_fields.payload_masked(task.action, task.payload))),
            ("schedule", schedule_brief(task)),
            ("status", task.state.status),
            *(
                [
                    (
                        "paused",
                        f"by {task.paused_by or '-'} {relative(task.paused_at, self.now)}: "
                        f"{task.pause_note or '(no note)'}",
                    )
                ]
                if task.paused
                else []
            ),
            *(
                [("alarm", f"since {relative(task.alarm_since, self.now)}: {task.alarm_note}")]
                if task.alarm_since
                else []
            ),
            ("next run", self.next_run(task)),
            ("queue / priority", f"{task.queue} / {task.priority}"),
            ("retries", f"{task.max_retries}, backoff {task.retry_backoff_seconds} s"),
            ("updated", relative(task.updated_at, self.now)),
        ]
        width = max(len(k) for k, _ in lines)
        text = "\n".join(f"{k.ljust(width)}  {v}" for k, v in lines)
        if runs:
            text += "\n\nrecent runs:\n" + self.runs_table(runs)
        self.out(TaskOutputSerializer(task).data, text)

    def do_update(self, o: dict[str, Any]) -> None:
        task = self.task(o["id"])
        data = self.fields(o)
        if not data:
            raise CommandError("nothing to change: give at least one field option", returncode=2)
        task = services.task_update(task=task, data=data, by=self.by)
        self.out(TaskOutputSerializer(task).data, f"updated task {task.id}")

    def do_delete(self, o: dict[str, Any]) -> None:
        task = self.task(o["id"])
        services.task_delete(task=task, by=self.by)
        self.out({"id": o["id"], "deleted": True}, f"deleted task {o['id']} and its runs")

    def do_execute(self, o: dict[str, Any]) -> None:
        task = self.task(o["id"])
        run = services.task_execute(task=task, trigger=Trigger.CLI, by=self.by)
        self.out(RunOutputSerializer(run).data, f"run {run.id} of {run.task_id} queued now")

    def do_schedule(self, o: dict[str, Any]) -> None:
        task = self.task(o["id"])
        if o.get("every") is not None or o.get("cron"):
            if o.get("expires_in") is not None:
                raise CommandError("--expires-in goes with --in or --at", returncode=2)
            task = services.task_update(task=task, data=self.recurring(o), by=self.by)
            self.out(
                TaskOutputSerializer(task).data,
                f"task {task.id}: {schedule_brief(task)}, next fire {self.next_run(task, short=True)}",
            )
            return
        run = services.task_schedule_once(
            task=task,
            delay_seconds=o.get("delay"),
            run_at=o.get("at"),
            expires_in_seconds=o.get("expires_in"),
            by=self.by,
        )
        self.out(
            RunOutputSerializer(run).data,
            f"run {run.id} of {task.id} due {relative(run.due_at, self.now)} ({run.due_at.isoformat()})",
        )

    def do_pause(self, o: dict[str, Any]) -> None:
        task = services.task_pause(task=self.task(o["id"]), note=o["note"], by=self.by)
        self.out(TaskOutputSerializer(task).data, f"paused task {task.id}")

    def do_resume(self, o: dict[str, Any]) -> None:
        task = self.task(o["id"])
        task = services.task_resume(task=task, by=self.by)
        self.out(
            TaskOutputSerializer(task).data,
            f"resumed task {task.id}; next run {relative(task.state.next_run_at, self.now)}",
        )

    def do_runs(self, o: dict[str, Any]) -> None:
        task_id = self.task(o["id"]).id if o.get("id") else None
        found = selectors.run_list(
            task=task_id, status=o["status"], trigger=o["trigger"], dead=o["dead"]
        )
        runs = list(found[: max(o["limit"], 0)])
        self.out(RunOutputSerializer(runs, many=True).data, self.runs_table(runs))

    def do_show(self, o: dict[str, Any]) -> None:
        run = self.run(o["run_id"])
        outcome = selectors.run_outcome(run=run)
        run = outcome.current(run)
        self.out(self.run_detail(run, outcome), self.outcome_text(run, outcome))

    def do_wait(self, o: dict[str, Any]) -> None:
        """Poll the run's outcome until it is known or ``--timeout`` passes."""
        run = self.run(o["run_id"])
        timeout = o.get("timeout")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            outcome = selectors.run_outcome(run=run)
            run = outcome.current(run)
            self.now = timezone.now()
            if outcome.status is not None:
                break
            if deadline is not None and time.monotonic() >= deadline:
                self.out(self.run_detail(run, outcome), self.outcome_text(run, outcome))
                latest = outcome.latest
                raise CommandError(
                    f"run {run.id}: no outcome after {timeout:g} s (attempt {latest.attempt} "
                    f"is {latest.status})",
                    returncode=2,
                )
            pause = WAIT_POLL_SECONDS
            if deadline is not None:
                pause = max(0.0, min(pause, deadline - time.monotonic()))
            time.sleep(pause)
        self.out(self.run_detail(run, outcome), self.outcome_text(run, outcome))
        if outcome.status != RunStatus.COMPLETED:
            latest = outcome.latest
            reason = latest.error.strip().splitlines()[0] if latest.error.strip() else ""
            raise CommandError(
                f"run {run.id} {outcome.status} (attempt {latest.attempt})"
                + (f": {reason}" if reason else ""),
                returncode=1,
            )

    def run_detail(self, run: Run, outcome: selectors.RunOutcome) -> Any:
        return RunDetailSerializer(run, context={"outcome": outcome}).data

    def outcome_text(self, run: Run, outcome: selectors.RunOutcome) -> str:
        latest = outcome.latest
        lines = [
            ("run", str(run.id)),
            ("task", run.task_id),
            (
                "outcome",
                f"{outcome.status or 'not yet'} (attempt {latest.attempt} of "
                f"{len(outcome.attempts)}, run {latest.id}, {latest.status})",
            ),
            ("trigger", run.trigger),
            ("due", relative(run.due_at, self.now)),
        ]
        if latest.error:
            lines.append(("error", latest.error.strip().splitlines()[0]))
        width = max(len(k) for k, _ in lines)
        rows = [
            [
                str(a.attempt),
                str(a.id),
                a.status,
                relative(a.started_at, self.now),
                relative(a.finished_at, self.now),
                a.worker or "-",
                a.error.strip().splitlines()[0][:80] if a.error.strip() else "-",
            ]
            for a in outcome.attempts
        ]
        return (
            "\n".join(f"{k.ljust(width)}  {v}" for k, v in lines)
            + "\n\nattempts:\n"
            + table(rows, ["TRY", "RUN", "STATUS", "STARTED", "FINISHED", "WORKER", "ERROR"])
        )

    def do_cancel(self, o: dict[str, Any]) -> None:
        run = services.run_cancel(run=self.run(o["run_id"]), by=self.by)
        self.out(RunOutputSerializer(run).data, f"cancelled run {run.id}")

    def do_retry(self, o: dict[str, Any]) -> None:
        run = self.run(o["run_id"])
        run = services.run_retry(run=run, by=self.by)
        self.out(RunOutputSerializer(run).data, f"run {run.id} (attempt {run.attempt}) queued")

    def do_backfill(self, o: dict[str, Any]) -> None:
        task = self.task(o["id"])
        runs = services.task_backfill(task=task, start=o["start"], end=o["end"], by=self.by)
        self.out(
            {"created": len(runs), "runs": RunOutputSerializer(runs, many=True).data},
            f"created {len(runs)} backfill runs" + ("\n" + self.runs_table(runs) if runs else ""),
        )

    def do_prune(self, o: dict[str, Any]) -> None:
        batch = o.get("batch")
        if batch is not None and batch < 1:
            raise CommandError("--batch: must be a positive whole number", returncode=2)
        report = services.runs_prune(now=self.now, batch=batch, by=self.by)
        self.out(
            report.as_dict(),
            f"deleted {report.runs} runs and {report.task_results} task results "
            f"in {report.seconds:.1f} s",
        )

    def do_preview(self, o: dict[str, Any]) -> None:
        task = self.task(o["id"])
        fires = selectors.task_preview(task=task, count=o["count"], now=self.now)
        data = {
            "task": task.id,
            "timezone": task.timezone,
            "fires": [{"utc": f.utc.isoformat(), "local": f.local.isoformat()} for f in fires],
        }
        rows = [[f.utc.isoformat(), f.local.isoformat(), relative(f.utc, self.now)] for f in fires]
        self.out(
            data,
            table(rows, ["UTC", f"LOCAL ({task.timezone})", "WHEN"])
            if rows
            else "no upcoming fires",
        )

    def do_sync(self, o: dict[str, Any]) -> None:
        """Plan, then apply unless ``--plan``/``--check``. A refused set prints one line per
        problem on stderr, each naming the definition and its field, and changes nothing."""
        dry = o["plan"] or o["check"]
        if not app_settings.SCHEDULES_MODULE:
            self.out(
                {"module": None, "declared": 0, "changes": [], "applied": False},
                "TASKS_SCHEDULES_MODULE is not set: no schedules are declared in code",
            )
            return
        try:
            plan = declared.schedules_plan() if dry else declared.schedules_sync()
        except declared.SchedulesError as exc:
            for line in exc.lines:
                self.stderr.write(f"{exc.module}: {line}")
            raise CommandError(
                f"{exc.module}: {len(exc.lines)} problem(s) in the declared schedules; "
                "nothing was changed",
                returncode=1,
            ) from exc
        applied = not dry and not plan.empty
        self.out(
            {**plan.as_dict(), "applied": applied},
            "\n".join([*plan.lines(), plan.summary(applied=applied)]),
        )
        if o["check"] and not plan.empty:
            raise CommandError(
                f"the tasks differ from {plan.module}: run manage.py tasks sync", returncode=1
            )

    def runs_table(self, runs: Sequence[Run]) -> str:
        rows = [
            [
                str(r.id),
                r.task_id,
                r.trigger,
                r.status,
                str(r.attempt),
                relative(r.due_at, self.now),
                relative(r.started_at, self.now),
                display_duration(r.duration_ms),
            ]
            for r in runs
        ]
        return table(rows, ["RUN", "TASK", "TRIGGER", "STATUS", "TRY", "DUE", "STARTED", "TOOK"])


def _whole_seconds(value: float, option: str) -> int:
    """A duration option as the integer field it sets; its bounds are the field's, checked
    (and worded) by the services as for the API and the admin."""
    if value != int(value):
        raise CommandError(
            f"--{option.replace('_', '-')} must be a whole number of seconds", returncode=2
        )
    return int(value)


def _is_uuid(text: str) -> bool:
    return bool(re.fullmatch(r"[0-9a-fA-F-]{32,36}", text))


__all__ = ["Command", "duration", "relative", "timedelta"]
