"""Scenario 1's grouping of late runs by cause (bench.lateness.late_causes): each late run
gets the first cause its instants show."""

import uuid
from datetime import UTC, datetime, timedelta

from bench.lateness import late_causes

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _run(due_s: float, late_ms: float, *, queued_s: float = -5.0, duration_ms: float = 2.0):  # type: ignore[no-untyped-def]
    due = T0 + timedelta(seconds=due_s)
    started = due + timedelta(milliseconds=late_ms)
    return (
        uuid.uuid4(),
        due,
        due + timedelta(seconds=queued_s),
        started,
        started + timedelta(milliseconds=duration_ms),
        late_ms,
    )


def test_each_late_run_gets_the_first_cause_its_instants_show() -> None:
    released_late = _run(1, 300, queued_s=0.2)
    received_late = _run(2, 40)
    busy = [_run(3, 0.5, duration_ms=50), _run(3.001, 0.5, duration_ms=50)]
    behind_busy = _run(3.01, 45)
    slack = _run(4, 9)
    on_time = _run(5, 1)
    runs = [released_late, received_late, *busy, behind_busy, slack, on_time]
    received = {str(r[0]): r[1].timestamp() - 1 for r in runs}
    received[str(received_late[0])] = received_late[1].timestamp() + 0.03

    causes = late_causes(runs, received, threshold_ms=5.0)

    assert (causes["late"], causes["of"]) == (4, 7)
    assert {cause: v["runs"] for cause, v in causes["by_cause"].items()} == {
        "released_late": 1,
        "received_late": 1,
        "pool_busy": 1,
        "worker_slack": 1,
    }
    assert causes["latest"][0]["late_ms"] == 300 and causes["latest"][0]["cause"] == "released_late"
