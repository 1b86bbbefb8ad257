"""Every status column as wide as ``choices.STATUS_MAX_LENGTH``: the tally of finished runs
(``RunTally.status``) was 10 characters, too narrow for ``interrupted``, so ``/metrics``
failed once a run was interrupted."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tasks_app", "0012_task_state"),
    ]

    operations = [
        migrations.AlterField(
            model_name="runtally",
            name="status",
            field=models.CharField(max_length=12),
        ),
        migrations.AlterField(
            model_name="taskstate",
            name="status",
            field=models.CharField(
                choices=[
                    ("created", "Created"),
                    ("pending", "Pending"),
                    ("running", "Running"),
                    ("completed", "Completed"),
                    ("failed", "Failed"),
                    ("paused", "Paused"),
                    ("cancelled", "Cancelled"),
                ],
                default="created",
                max_length=12,
            ),
        ),
    ]
