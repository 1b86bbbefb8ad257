"""One task per ``@task`` function: the tasks that enqueues wrote one per call (action
``django_task``, no schedule, created by ``django.tasks``) are folded into their function's
task (``services.django_task.function_task_id``), made here if missing. Each call's runs move
there unchanged (same ids, statuses and times), carrying the call's payload, and its queue
and priority where they differ from the function's task; the one-off tasks are deleted (their
audit trail stays); the function's task then shows its runs (tasks_app_idle_status)."""

import hashlib
import re

from django.db import migrations

ENQUEUED_BY = "django.tasks"


def function_task_id(path: str) -> str:
    """services.django_task.function_task_id as it was when this migration was written."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", path) and len(path) <= 100:
        return path
    digest = hashlib.sha256(path.encode()).hexdigest()[:12]
    return f"{path.lstrip('_.-')[: 100 - len(digest) - 1] or 'task'}-{digest}"

ONE_OFFS = """
SELECT t.id, t.payload->>'task'
  FROM tasks_app_task AS t
 WHERE t.action = 'django_task' AND t.schedule_type = 'none'
   AND t.payload ? 'args'
   AND EXISTS (SELECT 1 FROM tasks_app_taskauditentry AS a
                WHERE a.task_id = t.id AND a.event = 'created' AND a.by = %s)
"""

MOVE_RUNS = """
UPDATE tasks_app_run AS r
   SET task_id = f.id, payload = t.payload,
       queue = CASE WHEN t.queue = f.queue THEN '' ELSE t.queue END,
       priority = NULLIF(t.priority, f.priority)
  FROM tasks_app_task AS t, tasks_app_task AS f
 WHERE r.task_id = t.id AND t.id = ANY(%s) AND f.id = %s
"""

SHOW_RUNS = """
UPDATE tasks_app_taskstate AS s
   SET status = CASE WHEN t.paused OR s.status = 'paused' THEN s.status
                     ELSE tasks_app_idle_status(t, s) END,
       next_run_at = (SELECT w.due_at FROM tasks_app_earliest_waiting(t.id, NULL) AS w)
  FROM tasks_app_task AS t
 WHERE t.id = s.task_id AND t.id = ANY(%s)
"""


def fold(apps, schema_editor):
    Task = apps.get_model("tasks_app", "Task")
    TaskAuditEntry = apps.get_model("tasks_app", "TaskAuditEntry")
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(ONE_OFFS, [ENQUEUED_BY])
        by_path: dict[str, list[str]] = {}
        for task_id, path in cursor.fetchall():
            if path and task_id != function_task_id(path):
                by_path.setdefault(path, []).append(task_id)
        for path, one_offs in sorted(by_path.items()):
            target = function_task_id(path)
            found = Task.objects.filter(pk=target).first()
            if found is None:
                Task.objects.create(  # its state row comes from the tasks_app_task_state trigger
                    id=target,
                    name=path[:200],
                    description="Runs of the @task function, one per call enqueued from code.",
                    action="django_task",
                    payload={"task": path},
                )
                TaskAuditEntry.objects.create(
                    task_id=target, by=ENQUEUED_BY, event="created", changes={}
                )
            elif found.action != "django_task" or found.payload.get("task") != path:
                continue  # the id is another task's: these one-offs stay as they are
            cursor.execute(MOVE_RUNS, [one_offs, target])
            Task.objects.filter(pk__in=one_offs).delete()
        cursor.execute(SHOW_RUNS, [[function_task_id(p) for p in by_path]])


class Migration(migrations.Migration):

    dependencies = [
        ("tasks_app", "0024_run_own_call"),
    ]

    operations = [migrations.RunPython(fold, migrations.RunPython.noop)]
