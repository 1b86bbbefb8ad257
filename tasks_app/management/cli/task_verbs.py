"""The task verbs of ``manage.py tasks``: create, list, get, update, delete, execute,
schedule, pause, resume, backfill, preview."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError

from tasks_app import selectors, services
from tasks_app.models import Trigger
from tasks_app.selectors.representations import (
    RunOutputSerializer,
    TaskCreatedSerializer,
    TaskOutputSerializer,
)
from tasks_app.vocabulary import secret_fields
from tasks_app.vocabulary.display import flow_control_text, relative, schedule_brief

from .arguments import whole_seconds
from .base import CliCommand
from .output import table


class TaskVerbs(CliCommand):
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
        for option, field, off in (
            ("flow_key", "flow_key", ""),
            ("concurrency", "concurrency_limit", None),
            ("concurrency_per_key", "concurrency_limit_per_key", None),
            ("rate", "rate_limit", ""),
            ("rate_per_key", "rate_limit_per_key", ""),
        ):
            if options.get(option) is not None:
                data[field] = off if options[option] == "none" else options[option]
        for option, field in (("unique_on", "unique_on"), ("debounce", "debounce")):
            if options.get(option) is not None:
                data[field] = options[option]
        for option, field in (
            ("timeout", "timeout_seconds"),
            ("expires_after", "expires_after_seconds"),
            ("unique_for", "unique_for_seconds"),
        ):
            if options.get(option) is not None:
                data[field] = whole_seconds(options[option], option)
        data.update(self.recurring(options))
        return data

    def recurring(self, options: dict[str, Any]) -> dict[str, Any]:
        if options.get("every") is not None:
            return {
                "schedule_type": "interval",
                "interval_seconds": whole_seconds(options["every"], "every"),
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
                        f"by {task.state.paused_by or '-'} "
                        f"{relative(task.state.paused_at, self.now)}: "
                        f"{task.state.pause_note or '(no note)'}",
                    )
                ]
                if task.paused
                else []
            ),
            *(
                [
                    (
                        "alarm",
                        f"since {relative(task.state.alarm_since, self.now)}: "
                        f"{task.state.alarm_note}",
                    )
                ]
                if task.state.alarm_since
                else []
            ),
            ("next run", self.next_run(task)),
            ("queue / priority", f"{task.queue} / {task.priority}"),
            ("retries", f"{task.max_retries}, backoff {task.retry_backoff_seconds} s"),
            *([("flow control", flow)] if (flow := flow_control_text(task)) else []),
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
        run = services.task_execute(
            task=task, trigger=Trigger.CLI, by=self.by, payload=o.get("payload"), **self.unique(o)
        )
        if run.queue_name in selectors.paused_queues():
            made = f"run {run.id} of {run.task_id} waits: queue {run.queue_name} is paused"
        else:
            made = f"run {run.id} of {run.task_id} queued now"
        self.out(RunOutputSerializer(run).data, self.duplicate_text(run) or made)

    def unique(self, o: dict[str, Any]) -> dict[str, Any]:
        """The call's uniqueness options as the services take them (checked there)."""
        given: dict[str, Any] = {}
        if o.get("unique_key") is not None:
            given["unique_key"] = o["unique_key"]
        if o.get("unique_for") is not None:
            given["unique_for_seconds"] = whole_seconds(o["unique_for"], "unique_for")
        if o.get("replace"):
            given["on_duplicate"] = "replace"
        return given

    def duplicate_text(self, run: Any) -> str:
        if not run.deduplicated:
            return ""
        return (
            f"run {run.id} of {run.task_id} already holds key {run.unique_key} "
            f"({run.status}): no new run"
        )

    def do_schedule(self, o: dict[str, Any]) -> None:
        task = self.task(o["id"])
        if o.get("every") is not None or o.get("cron"):
            if o.get("expires_in") is not None:
                raise CommandError("--expires-in goes with --in or --at", returncode=2)
            if self.unique(o):
                raise CommandError(
                    "--unique-key, --unique-for and --replace go with --in or --at", returncode=2
                )
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
            **self.unique(o),
        )
        self.out(
            RunOutputSerializer(run).data,
            self.duplicate_text(run)
            or f"run {run.id} of {task.id} due {relative(run.due_at, self.now)} ({run.due_at.isoformat()})",
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

    def do_backfill(self, o: dict[str, Any]) -> None:
        task = self.task(o["id"])
        runs = services.task_backfill(task=task, start=o["start"], end=o["end"], by=self.by)
        self.out(
            {"created": len(runs), "runs": RunOutputSerializer(runs, many=True).data},
            f"created {len(runs)} backfill runs" + ("\n" + self.runs_table(runs) if runs else ""),
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
