"""An operator's session in a real browser against a live server and a real worker:
log in, create a cron task, see its preview and next run, Run now, watch the run complete,
read its output, pause with a note and find the note on the overview."""

from __future__ import annotations

import re
import time

import pytest

from tasks_app import services
from tasks_app.models import Run, RunStatus, Task
from tests.processes import wait_until
from tests.shared import log_in

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
MESSAGE = "hello from the browser"
NOTE = "Paused for the browser test: database maintenance until 14:00"


def test_operator_creates_runs_watches_and_pauses_a_cron_task(
    page, live_server, worker, django_user_model, screens
) -> None:
    base = live_server.url
    user = django_user_model.objects.create_superuser("ops", "ops@example.com", "pw-ops-123")
    log_in(page, base, user)
    assert page.locator("#tasks-overview-link a", has_text="Overview").is_visible()

    # Create a cron task from the task page; the preview follows the typing.
    page.goto(f"{base}/admin/tasks_app/task/add/")
    page.fill("#id_id", "browser-cron")
    page.fill("#id_name", "Quarter-hourly greeting")
    page.select_option("#id_action", "echo")
    message = page.locator("#payload-form [name='payload_form[message]']")
    message.wait_for()  # shown once the form keeps what is typed into it
    message.type(MESSAGE)
    page.select_option("#id_schedule_type", "cron")
    assert page.locator(".field-interval_seconds").is_hidden()  # only the cron's fields show
    page.fill("#id_cron", "*/15 * * * *")
    page.fill("#id_timezone", "Asia/Kolkata")
    words = page.locator("#schedule-preview .tasks-words")
    words.filter(has_text="Every 15 minutes (Asia/Kolkata)").wait_for()
    fires = page.locator("#schedule-preview .tasks-fires li")
    assert fires.count() == 5
    first = fires.nth(0).inner_text()
    assert re.search(r":(00|15|30|45):00 IST", first), first  # local time, then UTC
    page.fill("#id_cron", "*/15 * * *")
    page.locator("#schedule-preview .tasks-preview-error", has_text="cron").wait_for()
    page.fill("#id_cron", "*/15 * * * *")
    words.filter(has_text="Every 15 minutes").wait_for()
    page.click("input[name=_continue]")

    page.wait_for_url(re.compile(r".*/admin/tasks_app/task/browser-cron/change/"))
    task = Task.objects.get(pk="browser-cron")
    assert task.cron == "*/15 * * * *" and task.timezone == "Asia/Kolkata"
    next_run = page.locator("#task-next-run").inner_text()
    assert next_run == f"{task.state.next_run_at:%Y-%m-%d %H:%M:%S} UTC"
    assert task.payload == {"message": MESSAGE}  # typed into the form built from the schema
    assert page.locator("#schedule-preview .tasks-fires li").count() == 5

    # Run now, then watch the run reach completed in the run list.
    page.click("#btn-run-now")
    page.locator(".messagelist", has_text=re.compile(r"is (queued|running|completed)")).wait_for()
    run = Run.objects.get(task=task)
    list_url = f"{base}/admin/tasks_app/run/?q=browser-cron"
    deadline = time.monotonic() + 30
    while True:
        page.goto(list_url)
        row = page.locator("#result_list tbody tr").first
        if "completed" in row.inner_text():
            break
        assert time.monotonic() < deadline, f"run still {row.inner_text()!r}"
        time.sleep(0.5)
    row.locator("a", has_text=str(run.pk)[:8]).click()
    output = page.locator("pre.tasks-output").first
    assert output.inner_text() == MESSAGE
    assert page.locator(".field-worker").inner_text().strip() != ""

    # A second task fails, so the overview has something to flag.
    broken = services.task_create(
        id="browser-broken", action="fail", payload={"message": "upstream 503"}
    )
    failed = services.task_execute(task=broken)
    wait_until(
        lambda: Run.objects.get(pk=failed.pk).status == RunStatus.FAILED,
        timeout=30,
        message="the failing run to fail",
    )

    # Pause with a note; the note is on the overview.
    page.goto(f"{base}/admin/tasks_app/task/browser-cron/change/")
    assert page.locator(".tasks-runs .tasks-badge", has_text="completed").is_visible()
    page.screenshot(path=str(screens / "task-page.png"), full_page=True)
    page.fill("#pause-note", NOTE)
    page.click("#btn-pause")
    page.locator(".messagelist", has_text="paused").wait_for()
    assert page.locator("#btn-resume").is_visible()
    assert Task.objects.get(pk="browser-cron").load_state().paused_by == "ops"

    page.goto(f"{base}/admin/overview/")
    assert page.locator("#paused", has_text=NOTE).is_visible()
    assert page.locator("#failing", has_text="browser-broken").is_visible()
    page.locator("#health[data-state=ready]").wait_for()
    assert (
        page.locator("#health tr:has(th:text-is('database'))").locator(".tasks-badge").inner_text()
        == "up"
    )
    page.screenshot(path=str(screens / "overview.png"), full_page=True)
