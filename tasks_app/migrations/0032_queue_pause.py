"""A queue can be paused: ``QueuePause`` holds one row per paused queue (its name the key),
read by the release and by ``claim_run`` (queries.sql, not frozen). No SQL function changed."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tasks_app", "0031_flow_limits"),
    ]

    operations = [
        migrations.CreateModel(
            name="QueuePause",
            fields=[
                ("queue", models.CharField(max_length=100, primary_key=True, serialize=False)),
                ("paused_at", models.DateTimeField()),
                ("paused_by", models.CharField(blank=True, default="", max_length=150)),
                ("note", models.TextField(blank=True, default="")),
            ],
            options={
                "ordering": ["queue"],
                "verbose_name": "paused queue",
            },
        ),
    ]
