"""W003: the app's URLs are not included in ROOT_URLCONF."""

from __future__ import annotations

from django.test import override_settings

from tasks_app.checks import check_urls


def test_a_urlconf_without_the_app_is_a_warning_with_the_line_to_add() -> None:
    with override_settings(ROOT_URLCONF="tests.checks.admin_only_urls"):
        [warning] = check_urls()

    assert warning.id == "tasks_app.W003" and not warning.is_serious()
    assert "ROOT_URLCONF (tests.checks.admin_only_urls)" in warning.msg
    assert 'path("", include("tasks_app.urls"))' in str(warning.hint)


def test_the_demo_projects_urlconf_passes() -> None:
    assert check_urls() == []
