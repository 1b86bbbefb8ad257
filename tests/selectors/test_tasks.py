"""Task lists as the API and the CLI filter them (one selector for both)."""

import pytest

from tasks_app import selectors, services
from tasks_app.conf import app_settings
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


def test_values_in_use_are_the_distinct_actions_and_queues_in_order(settings) -> None:
    default = app_settings.QUEUES[0]
    settings.TASKS_QUEUES = [*app_settings.QUEUES, "slow"]
    services.task_create(id="a", action="noop", queue="slow")
    services.task_create(id="b", action="echo", payload={"message": "x"}, queue="slow")
    services.task_create(id="c", action="noop", queue=default)
    assert selectors.values_in_use("tasks_app_task", "action") == ["echo", "noop"]
    assert selectors.values_in_use("tasks_app_task", "queue") == sorted([default, "slow"])
    with pytest.raises(ValueError, match="payload"):
        selectors.values_in_use("tasks_app_task", "payload")


@pytest.mark.parametrize(
    ("filters", "index"),
    [
        ({"search": "0042"}, "task_id_trgm_idx"),
        ({"search": "report"}, "task_name_trgm_idx"),
        ({"status": [TaskStatus.FAILED]}, "task_state_status_idx"),
        ({"action": "email"}, "task_action_idx"),
        ({"schedule_type": ["cron"]}, "task_schedule_type_idx"),
    ],
)
def test_each_list_filter_and_the_search_can_be_served_by_an_index(filters, index) -> None:
    """The indexes match the SQL the lists send (the search's UPPER(col::text) LIKE
    '%X%', the filters' columns): with every way of reading all the tasks priced out (a
    table scan, a walk of the primary key), the plan finds the matches through the index,
    as Postgres does on its own once the table is large. A list that only reading every
    task could answer costs time in proportion to the number of tasks."""
    from tests.plans import scans_priced_out

    with scans_priced_out():
        plan = selectors.task_list(**filters)[:50].explain()
    assert index in plan, plan
