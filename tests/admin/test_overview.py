"""The overview page: counts, charts, failing/paused/alarm lists, health; fixed query count."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tasks_app import services
from tasks_app.models import Run, RunStatus, Task, TaskState, TaskStatus
from tasks_app.runtime.cache_keys import cache_key
from tasks_app.selectors import overview
from tests.stored_rows import state_set

pytestmark = pytest.mark.django_db
URL = "tasks-overview"


def make_runs(task: Task, status: str, n: int, *, minutes_ago: float, lateness: float) -> None:
    now = timezone.now()
    due = now - timedelta(minutes=minutes_ago)
    Run.objects.bulk_create(
        [
            Run(
                task=task,
                trigger="manual",
                status=status,
                scheduled_for=due,
                due_at=due,
                started_at=due + timedelta(milliseconds=lateness),
                lateness_ms=lateness + i,
                finished_at=due + timedelta(seconds=1),
            )
            for i in range(n)
        ]
    )


def test_index_links_to_the_overview(operator) -> None:
    page = operator.get(reverse("admin:index")).content.decode()
    assert f'href="{reverse(URL)}"' in page


def test_counts_percentiles_and_lists(operator) -> None:
    ok = services.task_create(id="ok", action="noop")
    bad = services.task_create(id="bad", action="noop")
    make_runs(ok, RunStatus.COMPLETED, 10, minutes_ago=5, lateness=100)  # 100..109 ms
    make_runs(ok, RunStatus.COMPLETED, 3, minutes_ago=120, lateness=5)  # day, not hour
    make_runs(bad, RunStatus.FAILED, 2, minutes_ago=3, lateness=1)
    state_set("bad", status=TaskStatus.FAILED, consecutive_failures=2)
    services.task_pause(task=ok, note="rotating credentials", by="ana")
    TaskState.objects.filter(pk="ok").update(
        alarm_since=timezone.now(), alarm_note="fire at 09:00 not done"
    )

    data = overview.overview_get(with_health=False)
    assert data.counts["completed"] == {"hour": 10, "day": 13}
    assert data.counts["failed"] == {"hour": 2, "day": 2}
    minute = [p for p in data.lateness if p.count == 10][0]
    assert minute.p50_ms == pytest.approx(104.5) and minute.p99_ms == pytest.approx(108.91)
    assert sum(c.get("completed", 0) for _, c in data.per_minute) == 10
    assert len(data.per_minute) == overview.CHART_MINUTES
    assert [t["id"] for t in data.failing] == ["bad"] and data.failing[0]["failed_day"] == 2
    assert data.paused[0]["pause_note"] == "rotating credentials"
    assert [t["id"] for t in data.alarms] == ["ok"]

    page = operator.get(reverse(URL)).content.decode()
    assert "rotating credentials" in page and "fire at 09:00 not done" in page
    assert "<svg" in page and "Runs per minute by status" in page
    assert "Start lateness p50 and p99 per minute" in page


def test_health_endpoint_reports_each_component_and_the_page_shows_it(operator) -> None:
    from django.core.cache import cache

    cache.delete(cache_key(overview.HEALTH_CACHED))
    cold = operator.get(reverse(URL)).content.decode()
    assert 'data-state="loading"' in cold  # the page does not wait for worker pings...
    assert "<th>database</th>" in cold and "<th>beat</th>" in cold  # ...but shows the rest
    assert "waiting for worker replies" in cold and "checking" not in cold
    health = operator.get(reverse("tasks-overview-health")).json()["health"]
    assert list(health) == ["database", "broker", "cache", "beat", "workers", "clock"]
    assert health["database"]["ok"] and health["cache"]["ok"] and health["broker"]["ok"], health
    assert health["clock"]["ok"], health  # this host's clock is the database's
    warm = operator.get(reverse(URL)).content.decode()
    for component in health:
        assert f"<th>{component}</th>" in warm


def test_overview_query_count_does_not_grow_with_tasks(
    operator, django_assert_max_num_queries
) -> None:
    def load() -> None:
        operator.get(reverse(URL))

    for i in range(3):
        t = services.task_create(id=f"t{i}", action="noop")
        services.task_pause(task=t, note=f"note {i}")
        TaskState.objects.filter(pk=t.pk).update(alarm_since=timezone.now())
        state_set(t.pk, status=TaskStatus.FAILED, consecutive_failures=1)
    load()
    with django_assert_max_num_queries(12) as small:
        load()
    for i in range(3, 30):
        t = services.task_create(id=f"t{i}", action="noop")
        services.task_pause(task=t, note=f"note {i}")
        TaskState.objects.filter(pk=t.pk).update(alarm_since=timezone.now())
        state_set(t.pk, status=TaskStatus.FAILED, consecutive_failures=1)
    with django_assert_max_num_queries(len(small.captured_queries)):
        load()


def test_overview_needs_staff(client) -> None:
    assert client.get(reverse(URL)).status_code == 302


def test_beat_health_reads_as_words_with_the_tick_to_the_second() -> None:
    from django.core.cache import cache

    from tasks_app.observability import health

    tick = timezone.now() - timedelta(seconds=2)
    health.record_beat_tick(tick)
    cache.delete(cache_key(overview.HEALTH_CACHED))
    beat = overview.health_get(quick=True)["beat"]
    assert beat["ok"]
    assert beat["detail"].startswith(f"last tick {tick:%Y-%m-%d %H:%M:%S} UTC, 2.")
    assert beat["detail"].endswith(" s ago") and "age_seconds" not in beat["detail"]
    assert "workers" not in overview.health_get(quick=True)  # the slow ping is left out


def test_lateness_legend_is_outside_the_dark_header(operator) -> None:
    page = operator.get(reverse(URL)).content.decode()
    header = page.split('id="chart-lateness"')[1].split("</h2>")[0]
    assert "p50" not in header and 'class="tasks-legend"' in page


@pytest.mark.parametrize(
    ("part", "fragments", "index"),
    [
        (
            "paused tasks",
            ('WHERE "tasks_app_taskstate"."status" = \'paused\' ORDER BY',),
            "task_paused_idx",
        ),
        (
            "failing tasks",
            ('"consecutive_failures" > 0', '"consecutive_failures" DESC'),
            "task_state_failing_idx",
        ),
    ],
)
def test_the_overview_lists_are_read_in_their_order_from_an_index(
    operator, part, fragments, index
) -> None:
    """At 1,000,000 tasks each list was a sort of every paused or failing task (0.2 and
    0.3 s): read from its index in the list's order, the paused list walks its first rows
    and the failing list sorts only the tasks of the longest streaks by their last failure."""
    from tests.plans import plan, sent

    for i in range(3):
        t = services.task_create(id=f"t{i}", action="noop")
        state_set(t.pk, status=TaskStatus.FAILED, consecutive_failures=i + 1)
        services.task_pause(task=t, note=f"note {i}")
    sql = sent(lambda: operator.get(reverse(URL)), *fragments)
    assert index in (found := plan(sql, priced_out=("seqscan",))), found
