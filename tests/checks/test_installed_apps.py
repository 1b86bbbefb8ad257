"""E003: an app the app imports is missing from INSTALLED_APPS. Without knox, end to end
(the message instead of knox's RuntimeError): test_startproject.py."""

from __future__ import annotations

from django.conf import settings
from django.core.management import call_command
from django.test import override_settings

from tasks_app.checks import REQUIRED_APPS, check_installed_apps


def test_every_missing_app_is_an_error_naming_it() -> None:
    missing = ["knox", "drf_spectacular"]
    kept = [app for app in settings.INSTALLED_APPS if app not in missing]
    with override_settings(INSTALLED_APPS=kept):
        errors = check_installed_apps()

    assert [e.id for e in errors] == ["tasks_app.E003"] * 2
    assert all(e.is_serious() for e in errors)
    assert "INSTALLED_APPS lacks 'knox'" in errors[0].msg
    assert errors[0].hint == 'Add "knox" to INSTALLED_APPS (before "tasks_app").'
    assert "'drf_spectacular'" in errors[1].msg


def test_the_demo_projects_apps_pass_and_its_own_choices_are_not_required() -> None:
    assert check_installed_apps() == []
    # Login lockout and the CSP header are the project's choice.
    assert not {"axes", "csp"} & set(REQUIRED_APPS)


def test_for_migrate_only_an_app_whose_tables_are_needed_is_an_error(db: None) -> None:
    # Without the API docs page's files and the static files app, the schema is the same.
    missing = ["drf_spectacular_sidecar", "django.contrib.staticfiles", "knox"]
    kept = [app for app in settings.INSTALLED_APPS if app not in missing[:2]]
    with override_settings(INSTALLED_APPS=kept):
        call_command("migrate", "--check", skip_checks=False, verbosity=0)
        assert check_installed_apps(databases=["default"]) == []
        assert len(check_installed_apps()) == 2  # check and runserver still name them
    without_knox = [app for app in settings.INSTALLED_APPS if app != missing[2]]
    with override_settings(INSTALLED_APPS=without_knox):
        assert [e.id for e in check_installed_apps(databases=["default"])] == ["tasks_app.E003"]
