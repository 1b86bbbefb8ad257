"""E004: a TASKS_* setting the app does not declare (tasks_app/conf.py), most often a typo."""

from __future__ import annotations

from django.core.management import call_command
from django.test import override_settings

from tasks_app.checks import check_unknown_settings


@override_settings(TASKS_STAL_SECONDS=90, TASKS_COLOUR="blue")
def test_an_undeclared_setting_is_an_error_naming_it_and_the_nearest_known_one() -> None:
    errors = {e.msg.split()[0]: e for e in check_unknown_settings()}

    assert set(errors) == {"TASKS_STAL_SECONDS", "TASKS_COLOUR"}
    typo = errors["TASKS_STAL_SECONDS"]
    assert typo.id == "tasks_app.E004" and typo.is_serious()
    assert typo.msg == "TASKS_STAL_SECONDS is not a setting of tasks_app; its value is not used."
    assert str(typo.hint).startswith("Did you mean TASKS_STALL_SECONDS? Remove it")
    assert not str(errors["TASKS_COLOUR"].hint).startswith("Did you mean")
    # Where the settings are listed, found from an installed wheel (which has no docs/).
    assert "python -m tasks_app.conf lists them" in str(typo.hint)
    assert ".md" not in str(typo.hint)


def test_the_demo_projects_settings_pass() -> None:
    # It sets TASKS_* from the environment (every variable the tests set, too).
    assert check_unknown_settings() == []


@override_settings(TASKS_STALL_SECONDS=90, TASKS={"default": {"BACKEND": "x"}})
def test_declared_settings_and_djangos_tasks_setting_pass() -> None:
    assert check_unknown_settings() == []


@override_settings(TASKS_STAL_SECONDS=90)
def test_a_misnamed_setting_does_not_stop_migrate(db: None) -> None:
    # The database is fine: migrate runs (check and runserver still name the setting).
    call_command("migrate", "--check", skip_checks=False, verbosity=0)
    assert check_unknown_settings(databases=["default"]) == []
    assert [e.id for e in check_unknown_settings()] == ["tasks_app.E004"]
