"""Indexes for the overview's lists and /metrics at 1,000,000 tasks: the paused tasks, latest
pause first (``task_paused_idx``: the list was a sort of every task, the count a pass over
them), and the failing tasks, longest streak first (``task_state_failing_idx``). Built with
CREATE INDEX CONCURRENTLY (outside a transaction): beat and the workers write task states
while they build."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ("tasks_app", "0022_periodic_entry_list_indexes"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="task",
            index=models.Index(
                condition=models.Q(("paused", True)),
                fields=["-paused_at", "id"],
                name="task_paused_idx",
            ),
        ),
        AddIndexConcurrently(
            model_name="taskstate",
            index=models.Index(
                condition=models.Q(
                    ("status", "failed"), ("consecutive_failures__gt", 0), _connector="OR"
                ),
                fields=["-consecutive_failures", "task"],
                name="task_state_failing_idx",
            ),
        ),
    ]
