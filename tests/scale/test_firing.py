"""Beat firing: every due schedule in one tick, each fire once, whatever the beats do."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db.models import F
from django.utils import timezone

from tasks_app.beat import firing
from tasks_app.beat.sweep import ready_messages
from tasks_app.messaging.queues import lane
from tasks_app.models import Run, RunStatus, Task, TaskState
from tests.processes import delete_queue, wait_until
from tests.scale.conftest import assert_unbroken, bulk_interval_tasks, fire_instants, leaders

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def private_queue():
    """A queue nobody consumes (messages are counted, then the queue is deleted)."""
    name = f"scale-fire-{uuid.uuid4().hex[:8]}"
    yield name
    delete_queue(name)


def test_every_due_schedule_is_recorded_and_published_in_one_tick(private_queue) -> None:
    now = timezone.now()
    first = now + timedelta(seconds=1)
    tasks = bulk_interval_tasks("batch", 2500, every=60, first=first, queue=private_queue)

    recorded = firing.schedule_fire_due(now=now, lookahead=timedelta(seconds=5))

    assert len(recorded) == len(tasks)
    runs = Run.objects.filter(task__id__startswith="batch-")
    assert runs.count() == len(tasks)
    assert runs.filter(status=RunStatus.QUEUED).count() == len(tasks)  # all published
    assert ready_messages(lane(private_queue)) == len(tasks)  # fires: the due lane
    for task in Task.objects.filter(id__in=["batch-00000", "batch-02499"]):
        [run] = task.runs.all()
        assert run.scheduled_for == run.due_at == first + timedelta(microseconds=int(task.id[-5:]))
        assert task.state.next_run_at == run.scheduled_for + timedelta(seconds=60)
        assert task.state.fire_count == 1

    # The same tick replayed (a restart that lost the advance, a second beat): nothing new.
    TaskState.objects.filter(task__id__startswith="batch-").update(
        next_run_at=F("next_run_at") - timedelta(seconds=60)
    )
    assert firing.schedule_fire_due(now=now, lookahead=timedelta(seconds=5)) == []
    assert Run.objects.filter(task__id__startswith="batch-").count() == len(tasks)
    assert ready_messages(lane(private_queue)) == len(tasks)  # fires: the due lane


def test_two_beats_fire_each_instant_once_and_only_the_leader_fires(worker, beat_factory) -> None:
    bulk_interval_tasks("pair", 20, every=1, first=timezone.now() + timedelta(seconds=2))
    first, second = beat_factory(), beat_factory()
    wait_until(lambda: leaders(first, second), timeout=15, message="a leader")
    pair_runs = Run.objects.filter(task__id__startswith="pair-")
    wait_until(lambda: pair_runs.count() >= 20 * 4, timeout=30, message="four fires each")
    assert len(leaders(first, second)) == 1  # while both run, one leads; the other stands by
    first.stop()
    second.stop()
    assert Run.objects.filter(task__id__startswith="pair-").count() >= 20 * 4
    for task_id in ("pair-00000", "pair-00019"):
        assert_unbroken(fire_instants(task_id), timedelta(seconds=1))


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_restart_neither_refires_nor_drops_an_instant(worker, beat_factory, how: str) -> None:
    bulk_interval_tasks(f"restart-{how}", 5, every=1, first=timezone.now() + timedelta(seconds=1))
    beat = beat_factory()
    wait_until(
        lambda: Run.objects.filter(task_id=f"restart-{how}-00000").count() >= 3,
        timeout=20,
        message="fires before the restart",
    )
    beat.kill() if how == "kill" else beat.stop()
    before = fire_instants(f"restart-{how}-00000")
    beat = beat_factory()
    wait_until(
        lambda: len(fire_instants(f"restart-{how}-00000")) >= len(before) + 3,
        timeout=20,
        message="fires after the restart",
    )
    beat.stop()
    assert_unbroken(fire_instants(f"restart-{how}-00000"), timedelta(seconds=1))


def test_standby_takes_over_within_10s_after_kill_9(worker, beat_factory) -> None:
    bulk_interval_tasks("failover", 3, every=1, first=timezone.now() + timedelta(seconds=1))
    beats = [beat_factory(), beat_factory()]
    [leader] = wait_until(lambda: leaders(*beats), timeout=15, message="a leader")
    [standby] = [b for b in beats if b is not leader]
    wait_until(
        lambda: Run.objects.filter(task_id="failover-00000").count() >= 2,
        timeout=15,
        message="the leader to fire",
    )

    leader.kill()
    killed_at = timezone.now()
    wait_until(lambda: leaders(standby), timeout=10, message="the standby to take over")
    # The standby fires: a fire recorded after the kill, within 10 s of it.
    wait_until(
        lambda: Run.objects.filter(task_id="failover-00000", created_at__gt=killed_at).exists(),
        timeout=10,
        message="a fire recorded by the new leader",
    )
    standby.stop()
    assert_unbroken(fire_instants("failover-00000"), timedelta(seconds=1))
