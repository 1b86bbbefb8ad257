"""Bad input is refused by the service layer with the field named, and nothing is written."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from tasks_app import services
from tasks_app.models import Run, Task, TaskStatus

pytestmark = pytest.mark.django_db


def refused(field: str, **fields: object) -> str:
    with pytest.raises(ValidationError) as info:
        services.task_create(**fields)  # type: ignore[arg-type]
    assert field in info.value.message_dict, info.value.message_dict
    assert Task.objects.count() == 0
    return " ".join(info.value.message_dict[field])


def test_unknown_action() -> None:
    assert "unknown action 'launch-rocket'" in refused("action", id="t1", action="launch-rocket")


def test_payload_that_breaks_the_action_schema() -> None:
    message = refused("payload", id="t1", action="echo", payload={"text": "hi"})
    assert "'message' is a required property" in message
    assert "must be a JSON object" in refused("payload", id="t1", action="echo", payload=[1])


def test_malformed_cron() -> None:
    message = refused("cron", id="t1", action="noop", schedule_type="cron", cron="61 * * * *")
    assert "minute: 61 is outside 0-59" in message


def test_unknown_time_zone() -> None:
    message = refused(
        "timezone",
        id="t1",
        action="noop",
        schedule_type="cron",
        cron="0 9 * * *",
        timezone="Europe/Atlantis",
    )
    assert "unknown time zone 'Europe/Atlantis'" in message


def test_bad_task_id() -> None:
    assert "letters, digits" in refused("id", id="no spaces allowed", action="noop")


def test_duplicate_id_is_a_conflict() -> None:
    services.task_create(id="t1", action="noop")
    with pytest.raises(services.ConflictError, match="already exists"):
        services.task_create(id="t1", action="noop")


@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        ({"delay_seconds": -1}, "delay_seconds", "must not be negative"),
        ({"delay_seconds": 366 * 86400}, "delay_seconds", "at most 365 days"),
        ({"delay_seconds": "soon"}, "delay_seconds", "must be a number"),
        ({"run_at": "past"}, "run_at", "is in the past"),
        (
            {"delay_seconds": 5, "run_at": "future"},
            "delay_seconds",
            "give either delay_seconds or run_at, not both",
        ),
    ],
)
def test_bad_delays_are_refused(kwargs: dict[str, object], field: str, message: str) -> None:
    task = services.task_create(id="t1", action="noop")
    now = timezone.now()
    kwargs = {
        k: {"past": now - timedelta(minutes=1), "future": now + timedelta(minutes=1)}.get(v, v)  # type: ignore[call-overload]
        for k, v in kwargs.items()
    }
    with pytest.raises(ValidationError) as info:
        services.task_schedule_once(task=task, **kwargs)  # type: ignore[arg-type]
    assert message in " ".join(info.value.message_dict[field])
    assert Run.objects.count() == 0


def test_max_delay_is_a_setting(settings: object) -> None:
    settings.TASKS_MAX_DELAY_SECONDS = 60  # type: ignore[attr-defined]
    task = services.task_create(id="t1", action="noop")
    with pytest.raises(ValidationError, match="at most 60 s"):
        services.task_schedule_once(task=task, delay_seconds=61)


def test_recurring_task_owns_one_beat_entry_kept_in_step() -> None:
    task = services.task_create(
        id="t1", action="noop", schedule_type="cron", cron="0 9 * * 1-5", timezone="Europe/Berlin"
    )
    entry = task.periodic_task
    assert entry is not None and entry.crontab is not None
    assert (entry.crontab.hour, entry.crontab.day_of_week, str(entry.crontab.timezone)) == (
        "9",
        "1-5",
        "Europe/Berlin",
    )
    assert task.state.status == TaskStatus.PENDING and task.state.next_run_at is not None

    services.task_pause(task=task, note="holiday", by="ops")
    entry.refresh_from_db()
    assert entry.enabled is False

    services.task_update(task=task, data={"schedule_type": "interval", "interval_seconds": 30})
    entry.refresh_from_db()
    assert entry.interval is not None and entry.interval.every == 30 and entry.crontab is None

    services.task_update(task=task, data={"schedule_type": "none"})
    assert task.periodic_task is None
    from django_celery_beat.models import PeriodicTask

    assert not PeriodicTask.objects.filter(name="task:t1").exists()
