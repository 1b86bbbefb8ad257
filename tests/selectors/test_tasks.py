"""Task lists as the API and the CLI filter them (one selector for both)."""

import pytest

from tasks_app import selectors, services
from tasks_app.models import TaskStatus

pytestmark = pytest.mark.django_db


def test_task_list_filters_by_status_action_kind_pause_and_search() -> None:
    services.task_create(id="nightly-report", name="Nightly report", action="noop")
    services.task_create(
        id="ping",
        action="echo",
        payload={"message": "x"},
        schedule_type="interval",
        interval_seconds=60,
    )
    paused = services.task_create(id="cleanup", action="noop")
    services.task_pause(task=paused, note="")

    def ids(**filters):  # type: ignore[no-untyped-def]
        return [t.id for t in selectors.task_list(**filters)]

    assert ids() == ["cleanup", "nightly-report", "ping"]
    assert ids(status=[TaskStatus.PENDING]) == ["ping"]
    assert ids(action="noop", paused=False) == ["nightly-report"]
    assert ids(schedule_type=["interval"]) == ["ping"]
    assert ids(search="REPORT") == ["nightly-report"]
