"""Flow control through real workers: a limit per key starts keys round-robin, and a rate
limit holds across two worker processes."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from tasks_app import services
from tasks_app.models import Run, RunStatus
from tests.processes import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

KEYS = ("acme", "globex", "initech")
PER_KEY = 100


def test_three_keys_at_a_limit_of_one_each_start_round_robin(worker_factory, beat_factory) -> None:
    """300 runs enqueued key by key (all of acme's first, before any worker is up), at most
    one per key and two in all at once: the keys take turns (round-robin) until a key has
    no run left; no key ever runs two at once."""
    task = services.task_create(
        id="per-customer",
        action="sleep",
        payload={"seconds": 0.05, "customer": "-"},
        flow_key="customer",
        concurrency_limit=2,
        concurrency_limit_per_key=1,
    )
    for key in KEYS:
        for _ in range(PER_KEY):
            services.task_execute(task=task, payload={"seconds": 0.05, "customer": key})
    beat_factory()
    worker_factory(concurrency=4)
    wait_until(
        lambda: Run.objects.filter(task=task, status=RunStatus.COMPLETED).count() == 3 * PER_KEY,
        timeout=240,
        interval=0.5,
        message="every run to complete",
    )
    runs = list(Run.objects.filter(task=task).order_by("started_at"))
    starts = [r.flow_key for r in runs]
    assert Counter(starts) == dict.fromkeys(KEYS, PER_KEY)
    # Round-robin: while every key has runs left, each takes its turn: any 15 starts in a
    # row hold each key 4 to 6 times (5 each, give or take one as runs end in a different
    # order than they began). In due order (first come, first served) acme's hundred would
    # come first.
    last = min(max(i for i, k in enumerate(starts) if k == key) for key in KEYS)
    shares = [Counter(starts[i : i + 15]) for i in range(last - 14)]
    assert all(min(c[k] for k in KEYS) >= 4 for c in shares), "".join(k[0] for k in starts)
    for key in KEYS:
        spans = [(r.started_at, r.finished_at) for r in runs if r.flow_key == key]
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), key


def test_a_rate_of_ten_a_second_holds_across_two_workers(worker_factory, beat_factory) -> None:
    """100 runs at 10/s on two worker processes: their starts come at 10 a second (within
    10 %), and no two seconds hold more than 22 of them (20 within 10 %)."""
    beat_factory()
    worker_factory(concurrency=2)
    worker_factory(concurrency=2)
    task = services.task_create(id="rated", action="noop", rate_limit="10/s")
    for _ in range(100):
        services.task_execute(task=task)
    wait_until(
        lambda: Run.objects.filter(task=task, status=RunStatus.COMPLETED).count() == 100,
        timeout=120,
        interval=0.5,
        message="every run to complete",
    )
    starts = sorted(Run.objects.filter(task=task).values_list("started_at", flat=True))
    workers = set(Run.objects.filter(task=task).values_list("worker", flat=True))
    rate = (len(starts) - 1) / (starts[-1] - starts[0]).total_seconds()
    busiest = max(sum(1 for t in starts if s <= t < s + timedelta(seconds=2)) for s in starts)
    assert len(workers) == 2, workers
    assert 9.0 <= rate <= 11.0, rate
    assert busiest <= 22, busiest
