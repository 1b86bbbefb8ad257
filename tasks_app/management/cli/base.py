"""What every verb of ``manage.py tasks`` shares: who acts (``--as``), the dispatch to
``do_<verb>`` with its exit statuses, looking up a task or a run, and printing."""

from __future__ import annotations

import getpass
import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from tasks_app import selectors, services
from tasks_app.models import Run, Task
from tasks_app.observability.logs import quiet_console
from tasks_app.services import permissions
from tasks_app.vocabulary.display import duration as display_duration
from tasks_app.vocabulary.display import relative

from ...runtime import clock
from .arguments import is_uuid
from .output import one_line, table


class CliCommand(BaseCommand):
    """The command's plumbing; the verbs are the ``do_<verb>`` methods of its subclasses."""

    as_json: bool
    now: datetime
    user: Any

    def handle(self, *args: Any, **options: Any) -> None:
        quiet_console(options["verbosity"])
        self.as_json = bool(options.get("json"))
        self.now = clock.now()
        verb = options["verb"]
        operation = "task_runs" if verb == "runs" and options.get("id") else verb
        self.user = self.acting_user(options.get("as_user"), operation)
        handler: Callable[[dict[str, Any]], None] = getattr(
            self, f"do_{options['verb'].replace('-', '_')}"
        )
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
        task = Task.objects.select_related("state").filter(pk=task_id).first()
        if task is None:
            raise CommandError(f"no task with id {task_id!r}", returncode=1)
        return task

    def run(self, run_id: str) -> Run:
        run = (
            Run.objects.select_related("task").filter(pk=run_id).first()
            if is_uuid(run_id)
            else None
        )
        if run is None:
            raise CommandError(f"no run with id {run_id!r}", returncode=1)
        return run

    def next_run(self, task: Task, *, short: bool = False) -> str:
        """The task's next run as the admin and the API show it (none while paused)."""
        if task.paused:
            return selectors.NEXT_RUN_PAUSED_SHORT if short else selectors.NEXT_RUN_PAUSED
        at = selectors.task_next_run_at(task)
        if short or at is None:
            return relative(at, self.now)
        return f"{relative(at, self.now)} ({at.isoformat()})"

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
                r.requested_by or "-",
            ]
            for r in runs
        ]
        return table(
            rows, ["RUN", "TASK", "TRIGGER", "STATUS", "TRY", "DUE", "STARTED", "TOOK", "BY"]
        )
