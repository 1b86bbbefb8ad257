"""The run verbs of ``manage.py tasks``: runs, show, wait, cancel, retry, prune."""

from __future__ import annotations

import json
import time
from typing import Any

from django.core.management.base import CommandError

from tasks_app import selectors, services
from tasks_app.models import Run, RunStatus
from tasks_app.selectors.representations import RunDetailSerializer, RunOutputSerializer
from tasks_app.vocabulary import secret_fields
from tasks_app.vocabulary.display import relative

from ...runtime import clock
from .arguments import WAIT_POLL_SECONDS
from .base import CliCommand
from .output import table


class RunVerbs(CliCommand):
    def do_runs(self, o: dict[str, Any]) -> None:
        task_id = self.task(o["id"]).id if o.get("id") else None
        found = selectors.run_list(
            task=task_id,
            status=o["status"],
            trigger=o["trigger"],
            requested_by=o.get("requested_by"),
            dead=o["dead"],
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
            self.now = clock.now()
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
            ("requested by", run.requested_by or "-"),
            ("action", run.made_with),
            ("due", relative(run.due_at, self.now)),
        ]
        if run.unique_key:
            lines.append(("unique key", run.unique_key))
        if run.payload is not None:  # its own arguments (a call from code, a run now with)
            masked = secret_fields.payload_masked(run.made_with, run.payload)
            lines.append(("payload", json.dumps(masked)))
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
        if run.status == RunStatus.RUNNING:
            text = f"asked running run {run.id} to stop; it ends cancelled"
        else:
            text = f"cancelled run {run.id}"
        self.out(RunOutputSerializer(run).data, text)

    def do_retry(self, o: dict[str, Any]) -> None:
        run = self.run(o["run_id"])
        run = services.run_retry(run=run, by=self.by)
        self.out(RunOutputSerializer(run).data, f"run {run.id} (attempt {run.attempt}) queued")

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
