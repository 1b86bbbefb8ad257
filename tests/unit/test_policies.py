"""Schedule policies decided by the pure planner: catch-up, bounds, max_runs, jitter."""

from datetime import UTC, datetime, timedelta

from tasks_app.timing.policies import Policy, fire_within_bounds, jitter_offset, plan_fires
from tasks_app.timing.scheduling import CronSchedule, IntervalSchedule

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
EVERY_10S = IntervalSchedule(seconds=10, anchor=T0)
LOOKAHEAD = timedelta(seconds=5)


def plan(now: datetime, **policy: object):  # type: ignore[no-untyped-def]
    return plan_fires(
        EVERY_10S, next_fire=T0, now=now, lookahead=LOOKAHEAD, policy=Policy(**policy)
    )  # type: ignore[arg-type]


def test_on_time_fire_is_recorded_ahead_and_the_next_one_planned() -> None:
    result = plan(T0 - timedelta(seconds=3))
    assert result.fires == (T0,)
    assert result.next_fire == T0 + timedelta(seconds=10)
    assert result.missed == 0 and not result.finished


def test_catch_up_after_five_missed_fires() -> None:
    # Beat was down: fires at +0, +10, +20, +30, +40 are older than the 5 s grace.
    now = T0 + timedelta(seconds=47)
    on_time = T0 + timedelta(seconds=50)  # within the lookahead: recorded ahead, as usual
    skip, latest, every = plan(now), plan(now, catchup="latest"), plan(now, catchup="all")
    assert (skip.fires, skip.missed) == ((on_time,), 5)
    assert (latest.fires, latest.missed) == ((T0 + timedelta(seconds=40), on_time), 4)
    assert every.fires == tuple(T0 + timedelta(seconds=s) for s in (0, 10, 20, 30, 40, 50))
    assert every.missed == 0
    assert {p.next_fire for p in (skip, latest, every)} == {T0 + timedelta(seconds=60)}


def test_catch_up_window_bounds_replay() -> None:
    now = T0 + timedelta(hours=3)
    result = plan(now, catchup="all", catchup_window=timedelta(seconds=60))
    assert all(f >= now - timedelta(seconds=60) for f in result.fires)
    assert len(result.fires) == 6 + 1  # the last minute's fires (grace-free) and the one ahead
    assert result.missed > 0


def test_start_at_delays_the_first_fire_and_end_at_finishes() -> None:
    result = plan(T0, start_at=T0 + timedelta(seconds=25))
    assert result.fires == () and result.next_fire == T0 + timedelta(seconds=30)
    ended = plan(T0 - timedelta(seconds=1), end_at=T0 + timedelta(seconds=5))
    assert ended.fires == (T0,) and ended.next_fire is None and ended.finished


def test_max_runs_stops_after_exactly_n() -> None:
    result = plan(T0 + timedelta(seconds=2), catchup="all", max_runs=3, fire_count=2)
    assert result.fires == (T0,) and result.finished and result.next_fire is None
    assert plan(T0, max_runs=3, fire_count=3).fires == ()


def test_jitter_is_stable_per_fire_and_within_bounds() -> None:
    offsets = {jitter_offset("t1", T0 + timedelta(minutes=i), 30) for i in range(50)}
    assert all(timedelta(0) <= o < timedelta(seconds=30) for o in offsets)
    assert len(offsets) > 40  # spread out
    assert jitter_offset("t1", T0, 30) == jitter_offset("t1", T0, 30)
    assert jitter_offset("t1", T0, 0) == timedelta(0)


def test_latest_after_long_downtime_of_a_daily_cron_replays_one() -> None:
    daily = CronSchedule.parse("0 6 * * *", "Europe/Berlin")
    first = daily.next_fire(T0 - timedelta(days=3))
    assert first is not None
    result = plan_fires(
        daily, next_fire=first, now=T0, lookahead=LOOKAHEAD, policy=Policy(catchup="latest")
    )
    assert len(result.fires) == 1 and result.fires[0] < T0
    assert result.next_fire == daily.next_fire(T0)


def test_a_fire_within_bounds_is_kept_and_none_once_the_schedule_has_ended() -> None:
    assert fire_within_bounds(T0, Policy(end_at=T0, max_runs=3, fire_count=2)) == T0
    assert fire_within_bounds(T0, Policy(end_at=T0 - timedelta(seconds=1))) is None
    assert fire_within_bounds(T0, Policy(max_runs=3, fire_count=3)) is None
    assert fire_within_bounds(None, Policy()) is None
