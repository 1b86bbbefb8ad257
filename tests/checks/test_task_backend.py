"""W002: @task functions exist but TASKS["default"] is not our backend (their .enqueue()
would run them in the caller and record nothing); E005: OPTIONS our backend does not take."""

from __future__ import annotations

import django
from django.conf import settings
from django.test import override_settings

from tasks_app.checks import check_backend_options, check_task_backend
from tasks_app.django_tasks import CeleryRunBackend

OURS = "tasks_app.django_tasks.CeleryRunBackend"
IMMEDIATE = (
    "django.tasks.backends.immediate.ImmediateBackend"
    if django.VERSION >= (6, 0)
    else "django_tasks.backends.immediate.ImmediateBackend"
)
WITH_TASKS = [*settings.INSTALLED_APPS, "tests.checks.djangotasks"]


class BackendWithRetries(CeleryRunBackend):
    """A later backend that takes an option: the allowed set is the class's."""

    supported_options = frozenset({"retries"})


@override_settings(INSTALLED_APPS=WITH_TASKS, TASKS={"default": {"BACKEND": IMMEDIATE}})
def test_task_functions_on_another_backend_are_a_warning_naming_them() -> None:
    [warning] = check_task_backend()

    assert warning.id == "tasks_app.W002" and not warning.is_serious()
    assert warning.msg.startswith(f'TASKS["default"]["BACKEND"] is {IMMEDIATE!r}: .enqueue()')
    assert "tests.checks.djangotasks.tasks.send_welcome_email" in warning.msg
    assert warning.hint == f'Set TASKS = {{"default": {{"BACKEND": "{OURS}"}}}}.'


@override_settings(INSTALLED_APPS=WITH_TASKS)
def test_task_functions_on_our_backend_or_a_subclass_pass() -> None:
    for backend in (OURS, f"{__name__}.BackendWithRetries"):
        with override_settings(TASKS={"default": {"BACKEND": backend}}):
            assert check_task_backend() == []


@override_settings(TASKS={"default": {"BACKEND": IMMEDIATE}})
def test_without_task_functions_another_backend_is_not_our_business() -> None:
    assert check_task_backend() == []


def test_an_option_our_backend_does_not_take_is_an_error_naming_it() -> None:
    tasks = {
        "default": {"BACKEND": OURS, "OPTIONS": {"queue": "reports"}},
        "other": {"BACKEND": IMMEDIATE, "OPTIONS": {"anything": 1}},  # not ours: not checked
    }
    with override_settings(TASKS=tasks):
        [error] = check_backend_options()

    assert error.id == "tasks_app.E005" and error.is_serious()
    assert "TASKS['default']['OPTIONS'] has 'queue'" in error.msg
    assert str(error.hint) == "Remove it: the backend takes no OPTIONS."


def test_a_backend_that_declares_options_takes_them_and_suggests_the_nearest() -> None:
    backend = f"{__name__}.BackendWithRetries"
    with override_settings(TASKS={"default": {"BACKEND": backend, "OPTIONS": {"retries": 3}}}):
        assert check_backend_options() == []
    with override_settings(TASKS={"default": {"BACKEND": backend, "OPTIONS": {"retry": 3}}}):
        [error] = check_backend_options()
    assert str(error.hint) == "Did you mean 'retries'? Remove it: the backend takes retries."


def test_the_demo_projects_task_settings_pass() -> None:
    assert check_task_backend() == [] and check_backend_options() == []
