"""Where a task's rules live: the field rules (``tasks_app.vocabulary.validation``) are pure, so a model
may run them without touching the database; the rules that span fields or read what is
stored (``tasks_app.services.task_rules``) run in the services and in the admin form."""

from __future__ import annotations

import ast
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.test import Client
from django.utils import timezone

from tasks_app import services
from tasks_app.models import Task
from tasks_app.vocabulary import validation
from tests.shared import form

ROOT = Path(__file__).resolve().parents[2]


def runtime_imports(path: Path) -> set[str]:
    """The modules a file imports when it runs (``if TYPE_CHECKING:`` blocks left out)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def test_the_field_rules_use_no_orm_and_no_model() -> None:
    imports = runtime_imports(ROOT / "tasks_app" / "vocabulary" / "validation.py")
    assert not {m for m in imports if m.startswith("django.db")}, imports
    assert not {m for m in imports if m.lstrip(".").startswith(("models", "services"))}, imports
    source = (ROOT / "tasks_app" / "vocabulary" / "validation.py").read_text()
    assert ".objects" not in source and ".state." not in source


@pytest.mark.django_db
def test_task_clean_reads_nothing_from_the_database(django_assert_num_queries: Any) -> None:
    """``Task.clean`` (run by every ``full_clean`` and model form) asks no query, also for a
    stored task whose schedule changed."""
    task = services.task_create(id="clean-me", action="noop")
    task = Task.objects.get(pk=task.pk)
    task.schedule_type, task.cron = "cron", "0 9 * * *"
    with django_assert_num_queries(0):
        task.full_clean(validate_unique=False, validate_constraints=False)
    task.payload = {"message": "\x00"}
    with django_assert_num_queries(0), pytest.raises(ValidationError) as caught:
        task.full_clean(validate_unique=False, validate_constraints=False)
    assert caught.value.message_dict == {
        "payload": ["at payload.message: must not contain NUL (\\u0000) characters"]
    }


@pytest.mark.django_db
def test_the_services_still_refuse_what_spans_fields() -> None:
    """The rules moved out of ``Task.clean`` are not lost: a save through the services
    refuses them, every error at once with the field errors."""
    with pytest.raises(ValidationError) as caught:
        services.task_create(
            id="spans",
            action="noop",
            priority=10,
            schedule_type="interval",
            interval_seconds=60,
            jitter_seconds=60,
        )
    assert caught.value.message_dict == {
        "priority": ["Ensure this value is less than or equal to 9."],
        "jitter_seconds": ["must be shorter than interval_seconds"],
    }
    assert not Task.objects.filter(pk="spans").exists()


@pytest.mark.django_db
def test_an_unchanged_past_once_instant_does_not_block_an_admin_edit() -> None:
    """The admin form checks a ``once`` instant against the clock only when it changes (read
    from what the form was loaded with, not from a second query)."""
    run_at = (timezone.now() + timedelta(hours=1)).replace(microsecond=0)
    task = services.task_create(
        id="once-passed", action="noop", schedule_type="once", run_at=run_at
    )
    past = run_at - timedelta(days=2)
    Task.objects.filter(pk=task.pk).update(run_at=past)  # its instant went by unrun
    user = get_user_model().objects.create_superuser("rules", "r@example.com", "pw-rules-123")
    client = Client()
    client.force_login(user)
    local = timezone.localtime(past)
    fields = form(
        id="once-passed",
        name="renamed",
        action="noop",
        payload="{}",
        schedule_type="once",
        run_at_0=local.strftime("%Y-%m-%d"),
        run_at_1=local.strftime("%H:%M:%S"),
    )
    url = f"/admin/tasks_app/task/{task.pk}/change/"
    response = client.post(url, fields)
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Task.objects.get(pk=task.pk).name == "renamed"

    moved = (timezone.localtime(past) - timedelta(hours=1)).strftime("%H:%M:%S")
    response = client.post(url, {**fields, "run_at_1": moved})
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert [m.split(" (")[0] for m in errors["run_at"]] == ["is in the past"]


def test_auto_pause_note_fits_the_rule_it_shares() -> None:
    long = "y" * (validation.PAUSE_NOTE_MAX_LENGTH + 500)
    assert validation.check_pause_note(validation.fit_pause_note(long)).endswith("y\u2026")
    assert validation.fit_pause_note("  short  ") == "short"
