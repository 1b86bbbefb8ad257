"""DST rules, checked against an independent brute-force reference over real transitions.

Rules: a fire at a local time that does not exist (spring forward) happens once, at the
first valid instant after the gap; a fire at a local time that happens twice (fall back)
happens once, at its first occurrence. Fires are strictly increasing.
"""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks_app.timing import scheduling
from tasks_app.timing.scheduling import CronSchedule

ZONES = [
    "America/New_York",
    "Europe/Berlin",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "America/Santiago",
    "Europe/London",
]
MINUTE = timedelta(minutes=1)


def transitions(zone: ZoneInfo, year: int) -> list[datetime]:
    """UTC instants (to the hour) at which the zone's offset changes during ``year``."""
    found = []
    at = datetime(year, 1, 1, tzinfo=UTC)
    offset = at.astimezone(zone).utcoffset()
    while at.year == year:
        nxt = at + timedelta(hours=1)
        if nxt.astimezone(zone).utcoffset() != offset:
            found.append(nxt)
            offset = nxt.astimezone(zone).utcoffset()
        at = nxt
    return found


def reference_fires(cron: str, zone: ZoneInfo, start: datetime, end: datetime) -> list[datetime]:
    """Walk every UTC minute in (start, end] and apply the rules literally."""
    expr = scheduling.parse_cron(cron)

    def matches(wall: datetime) -> bool:
        return (
            wall.minute in expr.minutes
            and wall.hour in expr.hours
            and expr.matches_day(wall.date())
        )

    fires = []
    previous_wall = (start).astimezone(zone).replace(tzinfo=None, fold=0)
    at = start + MINUTE
    while at <= end:
        local = at.astimezone(zone)
        wall = local.replace(tzinfo=None, fold=0)
        skipped = []
        probe = previous_wall + MINUTE
        while probe < wall:  # wall times that never showed on the clock (a gap)
            skipped.append(probe)
            probe += MINUTE
        if (matches(wall) and local.fold == 0) or any(matches(w) for w in skipped):
            fires.append(at)
        previous_wall = wall
        at += MINUTE
    return fires


fields = st.tuples(
    st.sampled_from(["*", "*/15", "0", "30", "0,30", "5-10", "59"]),
    st.sampled_from(["*", "1", "2", "3", "0-4", "*/2", "1,2", "2-3"]),
)


@settings(max_examples=40, deadline=None)
@given(
    zone_name=st.sampled_from(ZONES),
    year=st.sampled_from([2026, 2027]),
    which=st.integers(0, 1),
    cron_fields=fields,
)
def test_cron_across_transitions_matches_the_reference(
    zone_name: str, year: int, which: int, cron_fields: tuple[str, str]
) -> None:
    zone = ZoneInfo(zone_name)
    moments = transitions(zone, year)
    if not moments:
        return
    moment = moments[which % len(moments)]
    start, end = moment - timedelta(hours=6), moment + timedelta(hours=6)
    cron = f"{cron_fields[0]} {cron_fields[1]} * * *"
    schedule = CronSchedule.parse(cron, zone_name)
    ours = scheduling.fires_between(schedule, start, end, limit=10_000)
    assert ours == reference_fires(cron, zone, start, end)
    assert all(a < b for a, b in zip(ours, ours[1:], strict=False))  # strictly increasing
    walls = [f.astimezone(zone).replace(tzinfo=None, fold=0) for f in ours]
    assert len(walls) == len(set(walls))  # no local time fires twice


# Fixed cases: 02:30 daily (inside the spring gap in both zones) and 02:30 / 01:30 in the
# fall-back overlap (Berlin repeats 02:00-02:59, New York 01:00-01:59).
@pytest.mark.parametrize(
    ("zone", "cron", "day", "expected_utc"),
    [
        ("America/New_York", "30 2 * * *", (2026, 3, 8), [(2026, 3, 8, 7, 0)]),
        ("America/New_York", "30 1 * * *", (2026, 11, 1), [(2026, 11, 1, 5, 30)]),
        ("America/New_York", "30 2 * * *", (2027, 3, 14), [(2027, 3, 14, 7, 0)]),
        ("America/New_York", "30 1 * * *", (2027, 11, 7), [(2027, 11, 7, 5, 30)]),
        ("Europe/Berlin", "30 2 * * *", (2026, 3, 29), [(2026, 3, 29, 1, 0)]),
        ("Europe/Berlin", "30 2 * * *", (2026, 10, 25), [(2026, 10, 25, 0, 30)]),
        ("Europe/Berlin", "30 2 * * *", (2027, 3, 28), [(2027, 3, 28, 1, 0)]),
        ("Europe/Berlin", "30 2 * * *", (2027, 10, 31), [(2027, 10, 31, 0, 30)]),
    ],
)
def test_transition_days(
    zone: str, cron: str, day: tuple[int, int, int], expected_utc: list[tuple[int, ...]]
) -> None:
    start = datetime(*day, tzinfo=ZoneInfo(zone)).astimezone(UTC) - MINUTE
    end = start + timedelta(hours=24)
    fires = scheduling.fires_between(CronSchedule.parse(cron, zone), start, end, limit=10)
    assert fires == [datetime(*t, tzinfo=UTC) for t in expected_utc]
