"""Test actions: an idempotent effect, one that fails its first attempt, a process that kills
itself, one that stops itself, one that ignores its soft time limit."""

from __future__ import annotations

import os
import signal
import time
import uuid

from celery.exceptions import SoftTimeLimitExceeded
from django.utils import timezone

from tasks_app import actions
from tasks_app.actions import JSON, RunContext

from .models import Effect, Execution


def logical_run_id(ctx: RunContext) -> uuid.UUID:
    """The first attempt's id: the same for every attempt of one requested run."""
    return uuid.UUID(ctx.first_attempt_id)


@actions.register(
    "test-effect",
    schema={"type": "object", "properties": {"seconds": {"type": "number", "minimum": 0}}},
    description="Records an effect row keyed by run id (at most once), then sleeps.",
)
def record_effect(payload: dict[str, JSON], ctx: RunContext) -> str:
    key = logical_run_id(ctx)
    attempt = uuid.UUID(ctx.run_id)
    execution = Execution.objects.create(run_id=key, attempt_run_id=attempt, pid=os.getpid())
    Effect.objects.bulk_create([Effect(run_id=key, attempt_run_id=attempt)], ignore_conflicts=True)
    time.sleep(float(payload.get("seconds", 0)))
    Execution.objects.filter(pk=execution.pk).update(finished_at=timezone.now())
    return "effect recorded"


@actions.register(
    "test-flaky",
    description="Fails its first attempt; a later attempt records the effect.",
)
def flaky(payload: dict[str, JSON], ctx: RunContext) -> str:
    key = logical_run_id(ctx)
    attempt = uuid.UUID(ctx.run_id)
    execution = Execution.objects.create(run_id=key, attempt_run_id=attempt, pid=os.getpid())
    if ctx.attempt == 1:
        Execution.objects.filter(pk=execution.pk).update(finished_at=timezone.now())
        raise RuntimeError("first attempt fails (test-flaky)")
    Effect.objects.bulk_create([Effect(run_id=key, attempt_run_id=attempt)], ignore_conflicts=True)
    Execution.objects.filter(pk=execution.pk).update(finished_at=timezone.now())
    return "effect recorded on retry"


@actions.register("test-kill-self", description="SIGKILLs the process executing it.")
def kill_self(payload: dict[str, JSON], ctx: RunContext) -> None:
    Execution.objects.create(
        run_id=logical_run_id(ctx), attempt_run_id=uuid.UUID(ctx.run_id), pid=os.getpid()
    )
    os.kill(os.getpid(), signal.SIGKILL)


@actions.register(
    "test-ignore-soft-limit",
    schema={"type": "object", "properties": {"seconds": {"type": "number", "minimum": 0}}},
    description="Sleeps payload.seconds, swallowing the soft time limit.",
)
def ignore_soft_limit(payload: dict[str, JSON], ctx: RunContext) -> str:
    end = time.monotonic() + float(payload.get("seconds", 0))
    while time.monotonic() < end:
        try:
            time.sleep(max(0.0, end - time.monotonic()))
        except SoftTimeLimitExceeded:
            continue
    return "slept through the soft limit"


@actions.register(
    "test-stop-self",
    description="Stops its own process (SIGSTOP) in its first attempt; returns once continued.",
)
def stop_self(payload: dict[str, JSON], ctx: RunContext) -> str:
    execution = Execution.objects.create(
        run_id=logical_run_id(ctx), attempt_run_id=uuid.UUID(ctx.run_id), pid=os.getpid()
    )
    if ctx.attempt == 1:
        os.kill(os.getpid(), signal.SIGSTOP)
    Execution.objects.filter(pk=execution.pk).update(finished_at=timezone.now())
    return "continued"


@actions.register(
    "test-cancellable",
    schema={"type": "object", "properties": {"seconds": {"type": "number", "minimum": 0}}},
    description="Works in small steps for payload.seconds, stopping when the run is cancelled.",
)
def cancellable(payload: dict[str, JSON], ctx: RunContext) -> str:
    execution = Execution.objects.create(
        run_id=logical_run_id(ctx), attempt_run_id=uuid.UUID(ctx.run_id), pid=os.getpid()
    )
    end = time.monotonic() + float(payload.get("seconds", 0))
    steps = 0
    while time.monotonic() < end and not ctx.cancel_requested():
        time.sleep(0.02)
        steps += 1
    Execution.objects.filter(pk=execution.pk).update(finished_at=timezone.now())
    if ctx.cancel_requested():
        return f"stopped at the cancel request after {steps} steps"
    return f"ran all {steps} steps"
