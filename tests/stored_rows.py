"""What a refused input must leave untouched: the counts of every table it could write."""

from django_celery_beat.models import PeriodicTask

from tasks_app.models import Run, Task, TaskAuditEntry


def counts() -> tuple[int, int, int, int]:
    """Tasks, runs, django-celery-beat entries and audit entries."""
    return (
        Task.objects.count(),
        Run.objects.count(),
        PeriodicTask.objects.count(),
        TaskAuditEntry.objects.count(),
    )
