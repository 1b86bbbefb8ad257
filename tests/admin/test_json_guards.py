"""JSON text the admin reads (the task form's payload, "Run now with…", the live payload
check) is read by ``validation.read_json``: numbers that are not finite, nesting past 32
levels and what Postgres cannot store are an error naming the payload, never a 500, and
nothing is written. A declared function's task page answers any POST."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from tasks_app import services
from tasks_app.models import Run, Task
from tasks_app.schedules.sync import schedules_sync
from tests.shared import form as task_form
from tests.stored_rows import counts

pytestmark = pytest.mark.django_db

DEEP = "[" * 100_000 + "]" * 100_000

# name: (the payload text, text in the error)
BAD_PAYLOADS = {
    "NaN": ('{"x": NaN}', "at payload.x: numbers must be finite"),
    "Infinity": ('{"x": Infinity}', "at payload.x: numbers must be finite"),
    "-Infinity": ('{"x": [-Infinity]}', "at payload.x.0: numbers must be finite"),
    "1e400 (infinite once read)": ('{"x": 1e400}', "at payload.x: numbers must be finite"),
    "100,000 levels of nesting": (DEEP, "nests deeper than 32 levels"),
}


@pytest.mark.parametrize("case", BAD_PAYLOADS)
def test_run_now_with_a_payload_it_cannot_take_says_why_and_runs_nothing(
    operator: Client, case: str
) -> None:
    text, said = BAD_PAYLOADS[case]
    task = services.task_create(id="hello", action="echo", payload={"message": "hi"})
    before = counts()
    response = operator.post(
        reverse("admin:tasks_app_task_run_now", args=[task.pk]), {"payload": text}
    )
    assert response.status_code == 302
    page = operator.get(reverse("admin:tasks_app_task_change", args=[task.pk])).content.decode()
    assert f"Task hello not run: payload: {said}" in page
    assert counts() == before and not Run.objects.exists()


@pytest.mark.parametrize("case", BAD_PAYLOADS)
def test_the_task_form_refuses_the_payload_next_to_the_field(operator: Client, case: str) -> None:
    text, said = BAD_PAYLOADS[case]
    before = counts()
    response = operator.post(
        reverse("admin:tasks_app_task_add"), task_form(id="edge", action="noop", payload=text)
    )
    assert response.status_code == 200, "the form was accepted"
    errors = response.context["adminform"].form.errors
    assert any(said in m for m in errors["payload"]), errors
    assert counts() == before


@pytest.mark.parametrize("case", ["NaN", "1e400 (infinite once read)", "100,000 levels of nesting"])
def test_the_live_payload_check_names_the_problem(operator: Client, case: str) -> None:
    text, said = BAD_PAYLOADS[case]
    response = operator.post(
        reverse("admin:tasks_app_task_payload_check"), {"action": "noop", "payload": text}
    )
    assert response.status_code == 200
    assert response.json()["ok"] is False and said in response.json()["errors"][0]


@pytest.mark.parametrize(
    "posted",
    [
        {},
        {"description": "changed here"},
        {"payload": '{"x": NaN}', "action": "echo"},
        task_form(id="x", action="django_task", payload='{"task": "elsewhere.fn"}'),
    ],
    ids=["empty", "description", "payload", "the whole form"],
)
@pytest.mark.parametrize("stored", ["as declared", "stored before the rules"])
def test_any_post_of_a_declared_functions_task_page_is_answered(
    operator: Client, posted: dict[str, str], stored: str
) -> None:
    """Declared in code (``function_policy``), its definition read-only on the page:
    whatever is posted, and even when its stored payload breaks today's rules (nested
    deeper than 32 levels: an error on a field the form does not show), the page says
    nothing was changed instead of answering 500."""
    schedules_sync("tests.django_tasks.schedules")
    task = Task.objects.get(pk="tests.django_tasks.functions.flaky")
    if stored != "as declared":
        deep: object = 1
        for _ in range(40):
            deep = [deep]
        Task.objects.filter(pk=task.pk).update(payload={**task.payload, "kwargs": {"x": deep}})
    before = Task.objects.values().get(pk=task.pk)
    response = operator.post(
        reverse("admin:tasks_app_task_change", args=[task.pk]), posted, follow=True
    )
    assert response.status_code == 200
    page = response.content.decode()
    if stored == "as declared":
        assert "Nothing was changed: task" in page
    else:  # the form says what of the stored definition breaks the rules, on the form
        assert "Nothing was changed: task" in page or "payload: nests deeper than 32" in page
    assert Task.objects.values().get(pk=task.pk) == before
