from django.db import models


class Effect(models.Model):
    """The side effect of a run, made at most once per run.

    ``run_id`` is the run's *first attempt* id, so a retry (a new run row after the worker
    died mid-run) finds the effect already there: ``INSERT ... ON CONFLICT DO NOTHING``.
    """

    run_id = models.UUIDField(unique=True)
    attempt_run_id = models.UUIDField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"effect of run {self.run_id}"


class Execution(models.Model):
    """Append-only: one row each time an action body started (re-executions are visible)."""

    run_id = models.UUIDField(db_index=True)
    attempt_run_id = models.UUIDField()
    pid = models.IntegerField()
    at = models.DateTimeField(auto_now_add=True)
    # When the action body returned (null: its process died or was cut off first).
    finished_at = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"execution of {self.attempt_run_id} in pid {self.pid}"
