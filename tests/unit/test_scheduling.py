"""The pure scheduling module: cron parsing, next fires, time zones and DST."""

from datetime import UTC, datetime, timedelta

import pytest

from tasks_app.timing import scheduling
from tasks_app.timing.scheduling import CronSchedule, IntervalSchedule


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("* * * *", "expected 5 fields"),
        ("60 * * * *", "minute: 60 is outside 0-59"),
        ("* 24 * * *", "hour: 24 is outside 0-23"),
        ("*/0 * * * *", "step '0' must be a positive number"),
        ("5-1 * * * *", "runs backwards"),
        ("0 0 30 2 *", "never fires"),
        ("a * * * *", "is not a number"),
    ],
)
def test_malformed_cron_is_refused_with_the_field_named(text: str, message: str) -> None:
    with pytest.raises(scheduling.CronError, match=message):
        scheduling.parse_cron(text)


def test_unknown_zone_is_refused() -> None:
    with pytest.raises(scheduling.ZoneError, match="unknown time zone 'Mars/Olympus'"):
        scheduling.get_zone("Mars/Olympus")


def test_cron_names_and_macros() -> None:
    assert scheduling.parse_cron("0 9 * jan-mar mon-fri").weekdays == frozenset({1, 2, 3, 4, 5})
    daily = CronSchedule.parse("@daily", "UTC")
    assert daily.next_fire(utc(2026, 1, 1, 12)) == utc(2026, 1, 2)


def test_vixie_day_rule_either_day_field_matches() -> None:
    # 13th of the month OR any Friday.
    schedule = CronSchedule.parse("0 0 13 * 5", "UTC")
    fires = scheduling.next_fires(schedule, utc(2026, 2, 1), 3)
    assert fires == [utc(2026, 2, 6), utc(2026, 2, 13), utc(2026, 2, 20)]


def test_new_york_cron_keeps_local_wall_time_across_spring_forward() -> None:
    # 09:00 New York: 14:00 UTC in winter (EST), 13:00 UTC after 2026-03-08 (EDT).
    schedule = CronSchedule.parse("0 9 * * *", "America/New_York")
    fires = scheduling.next_fires(schedule, utc(2026, 3, 6, 15), 3)
    assert fires == [utc(2026, 3, 7, 14), utc(2026, 3, 8, 13), utc(2026, 3, 9, 13)]


def test_new_york_next_run_across_fall_back() -> None:
    schedule = CronSchedule.parse("0 9 * * *", "America/New_York")
    assert scheduling.next_fires(schedule, utc(2026, 10, 31, 14), 2) == [
        utc(2026, 11, 1, 14),  # EST again after 2026-11-01 02:00
        utc(2026, 11, 2, 14),
    ]


def test_missing_local_time_fires_once_at_the_end_of_the_gap() -> None:
    # 02:30 does not exist in New York on 2026-03-08: fire at 03:00 EDT (07:00 UTC).
    schedule = CronSchedule.parse("30 2 * * *", "America/New_York")
    assert schedule.next_fire(utc(2026, 3, 8, 0)) == utc(2026, 3, 8, 7)
    every_quarter = CronSchedule.parse("*/15 * * * *", "America/New_York")
    fires = scheduling.fires_between(
        every_quarter, utc(2026, 3, 8, 6, 30), utc(2026, 3, 8, 7, 30), limit=20
    )
    # 01:45 EST, then the gap 02:00-02:59 collapses into one fire at 03:00 EDT.
    assert fires == [
        utc(2026, 3, 8, 6, 45),
        utc(2026, 3, 8, 7),
        utc(2026, 3, 8, 7, 15),
        utc(2026, 3, 8, 7, 30),
    ]


def test_repeated_local_time_fires_once_at_first_occurrence() -> None:
    schedule = CronSchedule.parse("30 1 * * *", "America/New_York")
    fires = scheduling.fires_between(schedule, utc(2026, 11, 1, 0), utc(2026, 11, 2, 0), limit=5)
    assert fires == [utc(2026, 11, 1, 5, 30)]  # 01:30 EDT, not again at 01:30 EST


def test_interval_is_absolute_time() -> None:
    anchor = utc(2026, 3, 8, 6, 0)
    schedule = IntervalSchedule(seconds=3600, anchor=anchor)
    fires = scheduling.next_fires(schedule, anchor, 3)
    assert [f - anchor for f in fires] == [
        timedelta(hours=1),
        timedelta(hours=2),
        timedelta(hours=3),
    ]
    assert schedule.next_fire(anchor + timedelta(minutes=90)) == anchor + timedelta(hours=2)
