"""Catch-up, bounds, max_runs and jitter through beat's own firing function, with an
injected clock (waiting out real downtime would take minutes)."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from tasks_app import services
from tasks_app.beat import firing
from tasks_app.models import Run, Task, Trigger
from tests.stored_rows import run_set

pytestmark = pytest.mark.django_db
LOOKAHEAD = timedelta(seconds=2)


def fire(now):  # type: ignore[no-untyped-def]
    return firing.schedule_fire_due(now=now, lookahead=LOOKAHEAD)


def instants(task: Task) -> list:  # type: ignore[type-arg]
    return sorted(
        Run.objects.filter(task=task, trigger=Trigger.SCHEDULE).values_list(
            "scheduled_for", flat=True
        )
    )


def every_10s(task_id: str, **policy: object) -> Task:
    task = services.task_create(
        id=task_id, action="noop", schedule_type="interval", interval_seconds=10, **policy
    )
    assert task.state.next_run_at is not None
    return task


def test_catch_up_after_beat_was_down_for_five_fires() -> None:
    tasks = {c: every_10s(f"catchup-{c}", catchup=c) for c in ("skip", "latest", "all")}
    start = min(t.state.next_run_at for t in tasks.values())
    fire(start)  # beat records the first fire of each, then goes down
    first = {c: instants(t) for c, t in tasks.items()}
    assert all(len(v) == 1 for v in first.values())

    # Back after five fires (+10 .. +50 s) went by unrecorded, beyond the 5 s grace.
    back = start + timedelta(seconds=57)
    fire(back)
    replayed = {c: instants(t)[1:] for c, t in tasks.items()}
    t0 = {c: first[c][0] for c in tasks}
    assert replayed["skip"] == []
    assert replayed["latest"] == [t0["latest"] + timedelta(seconds=50)]
    assert replayed["all"] == [t0["all"] + timedelta(seconds=s) for s in (10, 20, 30, 40, 50)]
    for task in tasks.values():  # all continue on the grid after the downtime
        task.refresh_from_db()
        assert task.state.next_run_at == instants(task)[0] + timedelta(seconds=60)


def test_max_runs_stops_after_exactly_three() -> None:
    task = every_10s("three-times", max_runs=3)
    now = task.state.next_run_at
    for _ in range(6):
        fire(now)
        now += timedelta(seconds=10)
    task.refresh_from_db()
    assert len(instants(task)) == 3 and task.state.fire_count == 3
    assert task.state.next_run_at is None


def test_end_at_stops_and_start_at_delays_the_first_fire() -> None:
    now = timezone.now()
    later = services.task_create(
        id="from-later",
        action="noop",
        schedule_type="interval",
        interval_seconds=10,
        start_at=now + timedelta(minutes=5),
    )
    assert later.state.next_run_at == later.start_at  # an interval starts at start_at
    fire(now + timedelta(minutes=1))
    assert instants(later) == []

    ending = every_10s("until-soon", end_at=now + timedelta(seconds=25))
    clock = ending.state.next_run_at
    for _ in range(5):
        fire(clock)
        clock += timedelta(seconds=10)
    ending.refresh_from_db()
    assert all(i <= now + timedelta(seconds=25) for i in instants(ending))
    assert len(instants(ending)) == 2 and ending.state.next_run_at is None


def test_jitter_shifts_due_time_but_keeps_the_instant() -> None:
    task = every_10s("jittery", jitter_seconds=5)
    clock = task.state.next_run_at
    for _ in range(5):
        fire(clock)
        clock += timedelta(seconds=10)
    runs = list(Run.objects.filter(task=task))
    offsets = {r.due_at - r.scheduled_for for r in runs}
    assert len(runs) == 5
    assert all(timedelta(0) <= o < timedelta(seconds=5) for o in offsets)
    assert len(offsets) > 1


def test_policy_bounds_are_validated() -> None:
    now = timezone.now()
    with pytest.raises(ValidationError) as info:
        services.task_create(
            id="bad-bounds",
            action="noop",
            schedule_type="interval",
            interval_seconds=10,
            start_at=now,
            end_at=now - timedelta(hours=1),
            jitter_seconds=10,
        )
    assert info.value.message_dict["end_at"] == ["must be after start_at"]
    assert "shorter than interval_seconds" in info.value.message_dict["jitter_seconds"][0]


def test_an_edit_saved_from_a_copy_read_before_a_fire_keeps_that_fire_counted() -> None:
    """A form or an API request reads the task, beat fires it meanwhile, then the edit is
    saved: the fire stays counted (``max_runs`` holds) and the next fire stays advanced."""
    task = every_10s("edited-while-firing", max_runs=2)
    copy = Task.objects.get(pk=task.pk)
    first = task.state.next_run_at
    fire(first)
    services.task_update(task=copy, data={"name": "renamed"})
    task.refresh_from_db()
    assert (task.name, task.state.fire_count) == ("renamed", 1)
    assert task.state.next_run_at == first + timedelta(seconds=10)
    fire(first + timedelta(seconds=10))
    fire(first + timedelta(seconds=20))
    assert instants(task) == [first, first + timedelta(seconds=10)]


def test_a_schedule_saved_after_it_ended_plans_no_fire() -> None:
    """Saving decides a schedule's end by the rule beat fires by
    (``policies.fire_within_bounds``): ``max_runs`` fires recorded, or the first fire past
    ``end_at``."""
    task = every_10s("ended-by-runs", max_runs=1)
    fire(task.state.next_run_at)
    # Its fire came due (one recorded ahead of its instant would be dropped by the edit).
    run_set(Run.objects.get(task=task).pk, due_at=timezone.now() - timedelta(seconds=1))
    task.refresh_from_db()
    assert task.state.fire_count == 1 and task.state.next_run_at is None
    edited = services.task_update(task=task, data={"interval_seconds": 20})  # re-planned
    assert edited.state.next_run_at is None

    soon = services.task_create(
        id="ended-by-time",
        action="noop",
        schedule_type="interval",
        interval_seconds=60,
        end_at=timezone.now() + timedelta(seconds=30),
    )
    assert soon.state.next_run_at is None  # its first fire, a minute away, is past end_at
    later = services.task_update(task=soon, data={"end_at": timezone.now() + timedelta(hours=1)})
    assert later.state.next_run_at is not None
