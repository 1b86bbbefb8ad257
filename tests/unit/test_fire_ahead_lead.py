"""How far ahead beat prepares fires (``beat.fire_ahead_lead.lead_needed``): pure arithmetic."""

from datetime import UTC, datetime, timedelta

from tasks_app.beat.fire_ahead_lead import lead_needed, per_fire, wall_share

NOW = datetime(2026, 12, 2, 9, 0, 0, tzinfo=UTC)
S = timedelta(seconds=1)
LIMITS = {"now": NOW, "margin": 2 * S, "floor": 5 * S, "cap": 60 * S}


def steady(per_second: int, seconds: int) -> list[tuple[datetime, int]]:
    return [(NOW + i * S, per_second) for i in range(seconds)]


def test_a_steady_load_well_within_the_rate_needs_only_the_horizon() -> None:
    # 10,000 interval schedules every 10 s, beat doing 5,000 fires a second (x2 caution).
    assert lead_needed(steady(1000, 60), seconds_per_fire=2 / 5000, **LIMITS) == 5 * S


def test_a_burst_is_started_as_early_as_its_size_needs() -> None:
    burst = NOW + 40 * S
    counts = [*steady(100, 40), (burst, 100_000)]
    # 100,000 fires at 5,000/s (x2): 40 s of work, so they must start now and all be covered.
    assert lead_needed(counts, seconds_per_fire=2 / 5000, **LIMITS) == 41 * S
    # At 20,000/s (x2) they need 10 s: not yet (only the steady fires, which fit).
    assert lead_needed(counts, seconds_per_fire=2 / 20000, **LIMITS) == 5 * S


def test_the_lead_never_exceeds_the_cap_and_no_cap_means_the_horizon() -> None:
    counts = [(NOW + 90 * S, 1_000_000)]
    assert lead_needed(counts, seconds_per_fire=0.001, **LIMITS) == 60 * S  # at most the cap
    counts = [(NOW + 50 * S, 1_000_000)]
    assert lead_needed(counts, seconds_per_fire=0.001, **LIMITS) == 51 * S
    off = {**LIMITS, "cap": 0 * S}
    assert lead_needed(counts, seconds_per_fire=0.001, **off) == 5 * S


def test_the_measured_rate_follows_big_steps_and_ignores_small_ones() -> None:
    assert per_fire(seconds=1.0, fires=10, previous=0.001) == 0.001
    assert per_fire(seconds=1.0, fires=10_000, previous=0.001) == (0.001 + 0.0001) / 2


def test_the_share_of_wall_time_follows_the_steps_and_bounds_the_lead() -> None:
    # Steps of 0.2 s every 0.3 s get 2/3 of the time; blended from 0.5, then settled there.
    share = 0.5
    for _ in range(20):
        share = wall_share(step_seconds=0.2, start_to_start=0.3, fires=500, previous=share)
    assert abs(share - 2 / 3) < 1e-3
    # A step of a few fires says nothing; a step longer than the gap is a whole share.
    assert wall_share(step_seconds=0.2, start_to_start=0.3, fires=10, previous=0.4) == 0.4
    assert wall_share(step_seconds=5, start_to_start=1, fires=500, previous=1.0) == 1.0
    # A preparation starved by other work is never assumed to get nothing.
    assert wall_share(step_seconds=0, start_to_start=60, fires=500, previous=0.1) == 0.1
    # At 2/3 of the time, 100,000 fires at 1,000/s in-step need 150 s, not 100 s.
    burst = NOW + 120 * S
    limits = {**LIMITS, "cap": 300 * S}
    assert lead_needed([(burst, 100_000)], seconds_per_fire=1 / 1000, **limits) == 5 * S
    assert lead_needed([(burst, 100_000)], seconds_per_fire=1 / 1000 / share, **limits) == 121 * S
