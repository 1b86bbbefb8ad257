"""The missed-run alarm (``alarm_since``, ``alarm_note``) and the schedule error move from the
task's configuration row (tasks_app_task, written only by a person's edit or a sync) to its
state row (tasks_app_taskstate), which beat writes through the store's named statements.
The values move with them; ``task_in_alarm_idx`` moves too."""

from django.db import migrations, models

COPY_TO_STATE = """
UPDATE tasks_app_taskstate AS s
   SET alarm_since = t.alarm_since, alarm_note = t.alarm_note, schedule_error = t.schedule_error
  FROM tasks_app_task AS t
 WHERE t.id = s.task_id
   AND (t.alarm_since IS NOT NULL OR t.alarm_note <> '' OR t.schedule_error <> '')
"""

COPY_TO_TASK = """
UPDATE tasks_app_task AS t
   SET alarm_since = s.alarm_since, alarm_note = s.alarm_note, schedule_error = s.schedule_error
  FROM tasks_app_taskstate AS s
 WHERE t.id = s.task_id
   AND (s.alarm_since IS NOT NULL OR s.alarm_note <> '' OR s.schedule_error <> '')
"""


class Migration(migrations.Migration):
    dependencies = [
        ("tasks_app", "0026_schedule_end_in_policies"),
    ]

    operations = [
        migrations.AddField(
            model_name="taskstate",
            name="alarm_since",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="taskstate",
            name="alarm_note",
            field=models.TextField(blank=True, db_default="", default="", editable=False),
        ),
        migrations.AddField(
            model_name="taskstate",
            name="schedule_error",
            field=models.TextField(blank=True, db_default="", default="", editable=False),
        ),
        migrations.RunSQL(COPY_TO_STATE, COPY_TO_TASK),
        migrations.RemoveIndex(model_name="task", name="task_in_alarm_idx"),
        migrations.RemoveField(model_name="task", name="alarm_since"),
        migrations.RemoveField(model_name="task", name="alarm_note"),
        migrations.RemoveField(model_name="task", name="schedule_error"),
        migrations.AddIndex(
            model_name="taskstate",
            index=models.Index(
                condition=models.Q(("alarm_since__isnull", False)),
                fields=["alarm_since"],
                name="task_in_alarm_idx",
            ),
        ),
    ]
