"""The task list at 1,400 px with long ids, names and schedules: every column on screen,
nothing scrolled sideways; and the admin index, which says where Tasks and
django-celery-beat's Periodic tasks meet. Screenshots: docs/task-list.png,
docs/admin-index.png."""

from __future__ import annotations

import pytest

from tasks_app import services
from tasks_app.models import Task
from tests.browser.conftest import DOCS, WIDE
from tests.shared import LONG_ID

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def ops(wide_page, live_server, django_user_model):
    django_user_model.objects.create_superuser("ops", "ops@example.com", "pw-ops-123")
    wide_page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    wide_page.fill("#id_username", "ops")
    wide_page.fill("#id_password", "pw-ops-123")
    wide_page.click("input[type=submit]")
    wide_page.wait_for_url(f"{live_server.url}/admin/")
    return wide_page, live_server.url


def list_sizes(page) -> dict[str, float]:
    return page.evaluate(
        """() => {
            const box = document.querySelector('#changelist .results');
            const cells = [...document.querySelectorAll('#result_list td.field-next_run_cell')];
            return {
                page: document.documentElement.scrollWidth,
                table: document.querySelector('#result_list').getBoundingClientRect().right,
                filters: document.querySelector('#changelist-filter').getBoundingClientRect().left,
                hidden: box.scrollWidth - box.clientWidth,
                clipped: cells.filter(c => c.scrollWidth > c.clientWidth + 1).length,
            };
        }"""
    )


def test_the_task_list_fits_1400_px(ops) -> None:
    page, base = ops
    services.task_create(
        id=LONG_ID,
        name="Nightly invoice export to accounting",
        action="echo",
        payload={"message": "exported"},
        schedule_type="cron",
        cron="30 2 * * 1-5",
        timezone="America/Argentina/Buenos_Aires",
    )
    services.task_create(
        id="heartbeat-ping", action="noop", schedule_type="interval", interval_seconds=10
    )
    paused = services.task_create(
        id="vendor-sync", action="noop", schedule_type="interval", interval_seconds=300
    )
    services.task_pause(task=paused, note="vendor maintenance", by="ops")
    services.task_create(id="by-hand", name="Run when asked", action="noop")
    services.task_create(
        id="reminder-once",
        action="noop",
        schedule_type="once",
        run_at=Task.objects.get(id="heartbeat-ping").state.next_run_at,
    )

    page.goto(f"{base}/admin/tasks_app/task/")
    sizes = list_sizes(page)
    print(f"task list at {WIDE['width']} px: {sizes}")
    page.screenshot(path=str(DOCS / "task-list.png"), full_page=True)
    print(
        page.evaluate("""() => [...document.querySelectorAll('#result_list thead th')].map(
        th => th.innerText.trim() + ':' + Math.round(th.getBoundingClientRect().width))""")
    )
    assert sizes["page"] <= WIDE["width"] and sizes["table"] <= sizes["filters"], sizes
    assert sizes["hidden"] <= 0 and sizes["clipped"] == 0, sizes
    headers = [h.strip().lower() for h in page.locator("#result_list thead th").all_inner_texts()]
    for column in ("id", "name", "action", "schedule", "status", "next run"):
        assert column in headers, headers
    row = page.locator("#result_list tbody tr", has_text="vendor-sync")
    assert row.locator("td.field-next_run_cell").inner_text() == "none: paused"
    page.screenshot(path=str(DOCS / "task-list.png"), full_page=True)


def test_the_index_says_where_tasks_and_periodic_tasks_meet(ops) -> None:
    page, base = ops
    row = page.locator("#tasks-and-periodic-tasks")
    assert row.is_visible() and "managed from the task" in row.inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDE["width"]
    # Each row's name on one line, and the API docs sentence closes on its own line, not on
    # a line of its own: one line of text per row at this width.
    for name in page.locator("#tasks-overview-link th a").all():
        assert name.bounding_box()["height"] < 24, name.inner_text()
    closing = page.locator("#tasks-overview-link td", has_text="OpenAPI document").locator("a")
    assert closing.bounding_box()["height"] < 24
    assert closing.evaluate("a => getComputedStyle(a).display") == "inline"
    page.screenshot(path=str(DOCS / "admin-index.png"), full_page=True)
    row.locator("a", has_text="Periodic tasks").click()
    page.locator("#periodic-tasks-note").wait_for()
    assert "edit the task, not the entry" in page.locator("#periodic-tasks-note").inner_text()


def test_choosing_cron_before_typing_one_asks_the_server_nothing(ops) -> None:
    page, base = ops
    refused: list[str] = []
    page.on("response", lambda r: refused.append(r.url) if r.status >= 400 else None)
    page.goto(f"{base}/admin/tasks_app/task/add/")
    page.select_option("#id_schedule_type", "cron")
    words = page.locator("#schedule-preview .tasks-words")
    words.filter(has_text="Type a cron expression").wait_for()
    page.fill("#id_cron", "30 2 * * 1-5")
    page.locator("#schedule-preview .tasks-fires li").first.wait_for()
    assert "Type a cron expression" not in words.inner_text()
    assert refused == []
