"""``manage.py tasks sync``: the schedules declared in code applied (``--plan``, ``--check``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from tasks_app.conf import app_settings
from tasks_app.schedules import sync as declared

from .base import CliCommand


class SyncVerb(CliCommand):
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
