"""E003: an app the app imports is missing from INSTALLED_APPS. Without knox, end to end
(the message instead of knox's RuntimeError): test_startproject.py."""

from __future__ import annotations

from django.conf import settings
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
