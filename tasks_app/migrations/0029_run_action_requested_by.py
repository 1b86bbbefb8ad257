"""A run records the action it was made with (``Run.action``: its payload and outcome are
masked by that action's secret fields for its whole life, whatever its task becomes) and who
asked for it (``Run.requested_by``).

Runs already stored take their task's action as it is now (the best that is known) and, where
their trigger says it, their author: beat for a schedule's fire, code for an enqueue; the
others' author was not recorded and stays blank.
"""

from django.db import migrations, models

FILL = """
UPDATE tasks_app_run AS r
   SET action = t.action,
       requested_by = CASE r.trigger WHEN 'schedule' THEN 'beat'
                                     WHEN 'enqueue' THEN 'code' ELSE '' END
  FROM tasks_app_task AS t
 WHERE t.id = r.task_id
"""


class Migration(migrations.Migration):
    dependencies = [
        ("tasks_app", "0028_pause_in_task_state"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="action",
            field=models.CharField(blank=True, db_default="", default="", max_length=100),
        ),
        migrations.AddField(
            model_name="run",
            name="requested_by",
            field=models.CharField(
                blank=True,
                db_default="",
                default="",
                help_text="Who asked for this run: a user, or beat, schedule:<module>, code, "
                "retry:<run id>.",
                max_length=250,
            ),
        ),
        migrations.RunSQL(FILL, migrations.RunSQL.noop),
    ]
