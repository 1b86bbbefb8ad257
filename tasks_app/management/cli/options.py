"""The verbs of ``manage.py tasks`` and their options."""

from __future__ import annotations

from django.core.management.base import CommandParser

from tasks_app import selectors
from tasks_app.models import RunStatus, ScheduleType, TaskStatus, Trigger
from tasks_app.vocabulary import validation

from .arguments import MAX_LIMIT, argv, bounded_int, duration, instant, json_object, limit


def add_verbs(parser: CommandParser) -> None:
    """The verbs of ``manage.py tasks`` and their options (docs/cli.md)."""
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
        p.add_argument("--payload", type=json_object, help="the action's payload, a JSON object")
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
        p.add_argument("--keep-runs", type=int, metavar="N", help="keep at most N finished runs")
        p.add_argument(
            "--flow-key",
            metavar="FIELD",
            help="the payload field whose value is a run's key for the per-key limits "
            "('none' removes it)",
        )
        p.add_argument(
            "--concurrency",
            type=limit,
            metavar="N",
            help="at most N runs of the task at once, across every worker ('none' removes it)",
        )
        p.add_argument(
            "--concurrency-per-key",
            type=limit,
            metavar="N",
            help="at most N runs with the same key at once ('none' removes it)",
        )
        p.add_argument(
            "--rate",
            metavar="N/PERIOD",
            help="at most N starts per s, m, h or d across every worker, e.g. 10/s "
            "('none' removes it)",
        )
        p.add_argument("--rate-per-key", metavar="N/PERIOD", help="the same per key")
        p.add_argument(
            "--unique-on",
            metavar="NAME",
            help="deduplicate calls on this keyword argument or payload field ('*': the "
            "whole call; '': not deduplicated)",
        )
        p.add_argument(
            "--unique-for",
            type=duration,
            metavar="DURATION",
            help="hold a call's key this long after it (with --debounce: delay the run so long)",
        )
        debounce = p.add_mutually_exclusive_group()
        debounce.add_argument(
            "--debounce",
            action="store_true",
            default=None,
            help="a duplicate call replaces the waiting run",
        )
        debounce.add_argument(
            "--no-debounce",
            dest="debounce",
            action="store_false",
            help="a duplicate call gets the waiting run",
        )
        recurring = p.add_mutually_exclusive_group()
        recurring.add_argument("--every", type=duration, help="interval schedule (30s, 5m, 1h)")
        recurring.add_argument("--cron", help="cron schedule, 5 fields ('0 9 * * 1-5')")
        recurring.add_argument("--on-demand", action="store_true", help="remove the schedule")
        p.add_argument("--timezone", help="IANA time zone for --cron (default UTC)")

    def unique_call(p: CommandParser) -> None:
        p.add_argument(
            "--unique-key",
            metavar="KEY",
            help="while a run of the task made with KEY waits, get that run, not a new one",
        )
        p.add_argument(
            "--unique-for",
            type=duration,
            metavar="DURATION",
            help="hold KEY this long after the call that made its run, whatever became of it "
            "(with --replace: the new run waits so long)",
        )
        p.add_argument(
            "--replace",
            action="store_true",
            help="replace the waiting run with KEY by this call (debounce)",
        )

    def one_off(p: CommandParser, *, required: bool) -> None:
        when = p.add_mutually_exclusive_group(required=required)
        when.add_argument(
            "--in",
            dest="delay",
            type=duration,
            metavar="DURATION",
            help="one run after 90s, 15m, 2h or 1d",
        )
        when.add_argument("--at", type=instant, metavar="ISO-8601", help="one run at this instant")
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
    p = verb("execute", "run a task now, with its payload or --payload")
    p.add_argument("id")
    p.add_argument(
        "--payload",
        type=json_object,
        help="this run's own payload, a JSON object (checked like the task's)",
    )
    unique_call(p)

    p = verb("schedule", "one run later (--in/--at) or a recurring schedule (--every/--cron)")
    p.add_argument("id")
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--in", dest="delay", type=duration, metavar="DURATION")
    when.add_argument("--at", type=instant, metavar="ISO-8601")
    when.add_argument("--every", type=duration, metavar="DURATION")
    when.add_argument("--cron", metavar="EXPR")
    p.add_argument("--timezone", help="IANA time zone for --cron")
    p.add_argument("--expires-in", type=duration, metavar="DURATION")
    unique_call(p)

    p = verb("pause", "pause a task (no new fires; delayed runs wait)")
    p.add_argument("id")
    p.add_argument("--note", default="")
    verb("resume", "resume a paused task").add_argument("id")

    p = verb("runs", "list runs (of one task, or all)")
    p.add_argument("id", nargs="?", help="only this task's runs")
    p.add_argument("--status", action="append", choices=RunStatus.values, help="repeat for several")
    p.add_argument("--trigger", action="append", choices=Trigger.values)
    p.add_argument(
        "--requested-by",
        metavar="WHO",
        help="only runs asked for by WHO: a user name, beat, schedule:<module>, code, "
        "retry:<run id>",
    )
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

    verb("cancel", "cancel a pending or queued run; ask a running one to stop").add_argument(
        "run_id"
    )
    verb("retry", "retry a failed, expired or cancelled run").add_argument("run_id")

    p = verb("backfill", "one run for each fire of the schedule in (start, end]")
    p.add_argument("id")
    p.add_argument("--start", type=instant, required=True, metavar="ISO-8601")
    p.add_argument("--end", type=instant, required=True, metavar="ISO-8601")

    p = verb(
        "prune",
        "delete expired runs now (retention; the leading beat does it continuously)",
    )
    p.add_argument("--batch", type=int, metavar="N", help="rows per delete (TASKS_RETENTION_BATCH)")

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

    verb("queues", "list the queues: paused or not, and the runs waiting on each")
    p = verb("pause-queue", "pause a queue (none of its runs starts; none is lost)")
    p.add_argument("name", help="the queue's name (one of TASKS_QUEUES)")
    p.add_argument("--note", default="", help="why it is paused")
    verb(
        "resume-queue", "resume a paused queue (its waiting runs start, earliest due first)"
    ).add_argument("name")

    p = verb("preview", "the next fire times of a task's schedule")
    p.add_argument("id")
    p.add_argument("--count", type=bounded_int(1, selectors.MAX_PREVIEW), default=5)
