"""What the fault tests count: runs grouped by first attempt, effects, executions."""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass

from django.db.models import Count

from tasks_app.models import FINAL_RUN_STATUSES, Run, RunStatus, Task
from tests.effects.models import Effect, Execution


def chains(task: Task) -> dict[uuid.UUID, list[Run]]:
    """Every requested run of ``task`` (its first attempt's id) with its attempts, in order."""
    out: dict[uuid.UUID, list[Run]] = defaultdict(list)
    for run in Run.objects.filter(task=task).order_by("attempt", "created_at"):
        out[run.first_attempt_id or run.id].append(run)
    return dict(out)


def unfinished(task: Task) -> int:
    """Runs of ``task`` not in a final status."""
    return Run.objects.filter(task=task).exclude(status__in=FINAL_RUN_STATUSES).count()


def settled(task: Task, expected: int) -> bool:
    """All ``expected`` requested runs reached a final status on their last attempt."""
    if unfinished(task):
        return False
    all_chains = chains(task)
    return len(all_chains) == expected and all(
        c[-1].status != RunStatus.RETRYING for c in all_chains.values()
    )


@dataclass(frozen=True)
class Tally:
    requested: int
    completed: int  # requested runs whose last attempt completed
    effects: int  # effect rows (one per requested run at most, by construction)
    lost: int  # requested runs with no effect
    duplicated: int  # requested runs that completed more than once
    attempts_executed_twice: int  # run rows whose action body started more than once
    re_executions: int  # extra action starts (a retry after the worker died mid-run)
    retried: int  # requested runs that needed more than one attempt


def tally(task: Task) -> Tally:
    all_chains = chains(task)
    keys = set(all_chains)
    effect_keys = set(Effect.objects.filter(run_id__in=keys).values_list("run_id", flat=True))
    completed_per_chain = Counter(
        first for first, runs in all_chains.items() for r in runs if r.status == RunStatus.COMPLETED
    )
    per_attempt = (
        Execution.objects.filter(run_id__in=keys)
        .values("attempt_run_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count()
    )
    executions = Execution.objects.filter(run_id__in=keys).count()
    return Tally(
        requested=len(keys),
        completed=sum(1 for runs in all_chains.values() if runs[-1].status == RunStatus.COMPLETED),
        effects=len(effect_keys),
        lost=len(keys - effect_keys),
        duplicated=sum(1 for n in completed_per_chain.values() if n > 1),
        attempts_executed_twice=per_attempt,
        re_executions=executions - len(effect_keys),
        retried=sum(1 for runs in all_chains.values() if len(runs) > 1),
    )
