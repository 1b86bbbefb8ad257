"""End to end: a hand-made django-celery-beat entry (a ``PeriodicTask`` no task owns) obeys
an edit made right after a fire — no further fire — under our scheduler as under stock
``DatabaseScheduler``, real ``celery beat`` processes side by side in one test.

Stock writes its first fire down by reading the row and saving every column back: an edit
committed in between is undone and the entry fires again (tests/beat/
test_stock_entry_writes.py). Ours writes only the fire's columns, so its edit is made at once;
stock's is made after the next clock fire, once that first write is behind it."""

import re

import pytest
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from tests.processes import Proc, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SCHEDULERS = {
    "ours": None,  # the project's TaskScheduler (settings.CELERY_BEAT_SCHEDULER)
    "stock": "django_celery_beat.schedulers:DatabaseScheduler",
}


def sends(beat: Proc, name: str) -> int:
    return len(re.findall(rf"Sending due task {re.escape(name)} ", beat.log()))


@pytest.mark.parametrize("scheduler", list(SCHEDULERS))
def test_disabling_a_stock_entry_right_after_a_fire_stops_the_next_one(
    scheduler: str, beat_factory, extra_queue: str
) -> None:
    every = lambda seconds: IntervalSchedule.objects.get_or_create(  # noqa: E731
        every=seconds, period=IntervalSchedule.SECONDS
    )[0]
    entry = PeriodicTask.objects.create(
        name="stock-5s", task="tasks_app.execute_task", interval=every(5), queue=extra_queue
    )
    # A 1 s entry is the clock that closes the window (it fires under either scheduler).
    PeriodicTask.objects.create(
        name="stock-clock", task="tasks_app.execute_task", interval=every(1), queue=extra_queue
    )
    beat = beat_factory(scheduler=SCHEDULERS[scheduler])
    wait_until(lambda: sends(beat, "stock-5s") >= 1, timeout=40, message="the first 5 s fire")
    if scheduler == "stock":
        clock = sends(beat, "stock-clock")
        wait_until(lambda: sends(beat, "stock-clock") > clock, timeout=10, message="a clock fire")

    entry.enabled = False
    entry.save()  # as the admin does: django-celery-beat's signal marks the change
    clock = sends(beat, "stock-clock")
    # Two periods later (the next fire was due 5 s after the first): nothing more.
    wait_until(
        lambda: sends(beat, "stock-clock") >= clock + 10,
        timeout=40,
        message="10 more clock fires",
    )
    assert sends(beat, "stock-5s") == 1, beat.log()[-3000:]
