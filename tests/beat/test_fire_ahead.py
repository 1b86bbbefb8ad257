"""A busy instant prepared ahead by the leading beat (``tasks_app.beat.fire_ahead``), driven
through beat's own class against the real database and broker, with an injected clock:
many cron fires on one minute are recorded and published well before it, and a pause, an
edit or a delete made after that but before the minute is still obeyed; a fire is recorded
once however often the preparation is replayed; a delayed run is not published early."""

from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from tasks_app import services
from tasks_app.beat import firing
from tasks_app.beat.fire_ahead import FireAhead
from tasks_app.models import Run, RunStatus, Task, Trigger
from tasks_app.worker import run_execution

pytestmark = pytest.mark.django_db
BURST = 40  # cron tasks on the same minute, half of them in Europe/London
ZONES = ("UTC", "Europe/London")


@pytest.fixture(autouse=True)
def own_queue(extra_queue: str, settings: Any) -> None:
    """The tasks of each test publish to a queue of its own, deleted after it: the messages
    of fires published ahead (due minutes later, their rows rolled back with the test) must
    not wait in the session's queue for the next module's worker, which would take them
    first and start its own runs minutes late."""
    settings.CELERY_TASK_DEFAULT_QUEUE = extra_queue


def burst_minute() -> datetime:
    """A whole minute between 2 and 3 minutes from now (so a pause or an edit made now, by
    the real clock, comes before it)."""
    return (timezone.now() + timedelta(minutes=3)).replace(second=0, microsecond=0)


def burst_tasks(at: datetime) -> list[Task]:
    """``BURST`` daily cron tasks whose next fire is ``at`` (Europe/London is UTC in winter,
    so at other times of year its tasks name the same instant an hour earlier)."""
    tasks = []
    for i in range(BURST):
        zone = ZONES[i % 2]
        local = at.astimezone(ZoneInfo(zone))
        tasks.append(
            services.task_create(
                id=f"burst-{i:03d}",
                action="noop",
                schedule_type="cron",
                cron=f"{local.minute} {local.hour} * * *",
                timezone=zone,
            )
        )
    assert {t.state.next_run_at for t in tasks} == {at}
    return tasks


def slow_beat() -> FireAhead:
    """Beat as it measures itself on a very slow machine: 2 fires a second recorded and 2
    published, so 40 fires on one instant must be recorded and published half a minute
    ahead (more than the release horizon, less than TASKS_FIRE_AHEAD_SECONDS)."""
    ahead = FireAhead()
    ahead.record_per_fire = ahead.publish_per_fire = 0.5
    return ahead


def prepare(ahead: FireAhead, now: datetime, passes: int = 5) -> None:
    for _ in range(passes):  # as beat does: a plan each leader pass, then release passes
        ahead.plan(now=now)
        ahead.prepare(now=now, budget=1.0)


def fires_at(at: datetime) -> dict[str, Run]:
    runs = Run.objects.filter(trigger=Trigger.SCHEDULE, scheduled_for=at)
    return {r.task_id: r for r in runs}


def test_a_burst_is_recorded_and_published_ahead_but_a_delayed_run_waits() -> None:
    at = burst_minute()
    tasks = burst_tasks(at)
    assert PeriodicTask.objects.filter(owner_task__in=tasks).count() == BURST
    waiting = services.task_create(id="delayed", action="noop")
    delay = (at - timezone.now()).total_seconds()
    same_instant = services.task_schedule_once(task=waiting, delay_seconds=delay)
    far = services.task_schedule_once(task=waiting, delay_seconds=3600)
    ahead = slow_beat()
    now = at - timedelta(seconds=30)
    ahead.plan(now=now)
    assert ahead.record_lead == ahead.release_lead == at + timedelta(seconds=1) - now
    prepare(ahead, now)
    # The instant stays covered until it has passed (work half done is not started over).
    assert ahead.record_lead == ahead.release_lead == at + timedelta(seconds=1) - now
    fires = fires_at(at)
    assert sorted(fires) == sorted(t.pk for t in tasks)
    assert {r.status for r in fires.values()} == {RunStatus.QUEUED}  # published, with an ETA
    assert {r.due_at for r in fires.values()} == {at}
    for task in tasks:
        task.refresh_from_db()
        assert task.state.next_run_at == at + timedelta(days=1)
    # The delayed runs stay in the database until they are within the release horizon.
    statuses = dict(Run.objects.filter(task=waiting).values_list("id", "status"))
    assert statuses == {same_instant.pk: RunStatus.PENDING, far.pk: RunStatus.PENDING}


def test_a_fast_beat_prepares_nothing_beyond_the_horizon() -> None:
    at = burst_minute()
    burst_tasks(at)
    ahead = FireAhead()  # 10,000 fires a second or so: 40 fires need no head start
    ahead.record_per_fire = ahead.publish_per_fire = 0.0001
    prepare(ahead, at - timedelta(seconds=30))
    assert ahead.record_lead == ahead.release_lead == services.horizon()
    assert fires_at(at) == {}


def test_replayed_preparation_and_firing_record_each_fire_once() -> None:
    at = burst_minute()
    tasks = burst_tasks(at)
    ahead = slow_beat()
    prepare(ahead, at - timedelta(seconds=30))
    first = {task_id: run.pk for task_id, run in fires_at(at).items()}
    # A second beat taking over with the same view, a replayed tick, then the usual firing.
    prepare(slow_beat(), at - timedelta(seconds=30))
    prepare(ahead, at - timedelta(seconds=20))
    ahead.fire_due(now=at - timedelta(seconds=2))
    firing.schedule_fire_due(now=at, lookahead=services.horizon())
    assert {task_id: run.pk for task_id, run in fires_at(at).items()} == first
    assert Run.objects.filter(task__in=tasks).count() == BURST
    assert {t.state.fire_count for t in Task.objects.filter(pk__in=first)} == {1}


def test_a_pause_after_the_fire_was_prepared_is_obeyed_and_a_resume_before_it_fires_once() -> None:
    at = burst_minute()
    tasks = burst_tasks(at)
    ahead = slow_beat()
    prepare(ahead, at - timedelta(seconds=30))
    paused, kept = tasks[0], tasks[1]
    prepared = fires_at(at)[paused.pk]
    services.task_pause(task=paused, note="maintenance")
    # Its prepared fire is gone: the message already in the broker finds no run.
    assert not Run.objects.filter(pk=prepared.pk).exists()
    assert run_execution.run_claim(run_id=str(prepared.pk), worker="w") is None
    prepare(ahead, at - timedelta(seconds=10))
    ahead.fire_due(now=at - timedelta(seconds=2))
    assert paused.pk not in fires_at(at) and kept.pk in fires_at(at)
    # Resumed before the minute: it fires at the minute, once.
    services.task_resume(task=paused)
    ahead.fire_due(now=at - timedelta(seconds=1))
    again = fires_at(at)[paused.pk]
    assert again.pk != prepared.pk
    assert Run.objects.filter(task=paused, trigger=Trigger.SCHEDULE).count() == 1
    paused.refresh_from_db()
    assert paused.state.fire_count == 1
    assert paused.state.next_run_at == at + timedelta(days=1)


def test_an_edit_after_the_fire_was_prepared_moves_it_and_a_rename_keeps_it() -> None:
    at = burst_minute()
    tasks = burst_tasks(at)
    ahead = slow_beat()
    prepare(ahead, at - timedelta(seconds=30))
    moved, renamed = tasks[0], tasks[2]  # both UTC
    old = fires_at(at)
    later = at + timedelta(minutes=5)
    services.task_update(task=moved, data={"cron": f"{later.minute} {later.hour} * * *"})
    services.task_update(task=renamed, data={"name": "renamed"})
    assert not Run.objects.filter(pk=old[moved.pk].pk).exists()
    assert run_execution.run_claim(run_id=str(old[moved.pk].pk), worker="w") is None
    assert Run.objects.filter(pk=old[renamed.pk].pk, status=RunStatus.QUEUED).exists()
    moved.refresh_from_db()
    assert moved.state.next_run_at == later
    ahead.fire_due(now=at - timedelta(seconds=1))
    assert moved.pk not in fires_at(at)
    ahead.fire_due(now=later - timedelta(seconds=1))
    assert [r.scheduled_for for r in Run.objects.filter(task=moved)] == [later]


def test_a_delete_after_the_fire_was_prepared_leaves_nothing_to_run() -> None:
    at = burst_minute()
    tasks = burst_tasks(at)
    prepare(slow_beat(), at - timedelta(seconds=30))
    gone = tasks[0]
    prepared = fires_at(at)[gone.pk]
    services.task_delete(task=gone)
    assert run_execution.run_claim(run_id=str(prepared.pk), worker="w") is None
    assert not Run.objects.filter(task_id=gone.pk).exists()
    assert len(fires_at(at)) == BURST - 1
