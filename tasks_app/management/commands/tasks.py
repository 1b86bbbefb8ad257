"""``manage.py tasks <verb>``: the task system from a shell. Reference: docs/cli.md.

Each verb parses its arguments, calls one service (or selector), and prints either an
aligned table with relative times or, with ``--json``, the same JSON the REST API returns.
Exit status: 0 on success; 1 with a one-line message on stderr when the system refuses
(validation, conflict, not found, permission); 2 for usage errors (argparse). ``wait`` exits
with the run's outcome: 0 completed, 1 failed / expired / cancelled / skipped, 2 timed out.

Who acts: whoever can run ``manage.py`` holds the database credentials and the secret key,
so by default the CLI is a trusted operator (every permission; the audit trail records
``cli:<login name>``). ``--as USER`` acts as that Django user instead: each verb is the
operation of the same name in ``tasks_app.services.permissions.OPERATION_PERMISSIONS`` (``runs ID``:
``task_runs``), checked before anything is read, and the services check the user again
(the task's action, a run created by a change), exactly as for the admin and the API.
"""

from __future__ import annotations

from django.core.management.base import CommandParser

from tasks_app.management.cli.options import add_verbs
from tasks_app.management.cli.queue_verbs import QueueVerbs
from tasks_app.management.cli.run_verbs import RunVerbs
from tasks_app.management.cli.sync_verb import SyncVerb
from tasks_app.management.cli.task_verbs import TaskVerbs


class Command(TaskVerbs, RunVerbs, QueueVerbs, SyncVerb):
    """The verbs are in ``tasks_app/management/cli/`` (one module per group)."""

    help = (
        "Create, list, run, schedule, pause and inspect tasks and runs; pause queues "
        "(see docs/cli.md)."
    )
    # Django's system checks (models, URLs, admin) would take a large share of each call; they
    # run at release (migrate) and with manage.py check, as for Django's own changepassword.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        add_verbs(parser)
