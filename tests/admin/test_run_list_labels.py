"""Words in the admin: the run list's trigger filter names the API and the CLI as such (not
"Api" / "Cli"), and a chart point counts "1 run", "2 runs"."""

from __future__ import annotations

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_trigger_filter_says_api_and_cli(operator) -> None:
    page = operator.get(reverse("admin:tasks_app_run_changelist")).content.decode()
    assert ">API</a>" in page and ">CLI</a>" in page
    assert ">Api</a>" not in page and ">Cli</a>" not in page


def test_lateness_points_count_their_runs_in_words() -> None:
    from datetime import UTC, datetime

    from tasks_app.admin.views import svg_lateness
    from tasks_app.selectors.overview import MinuteLateness

    one = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
    two = datetime(2026, 1, 5, 9, 31, tzinfo=UTC)
    svg = str(
        svg_lateness(
            [MinuteLateness(one, 12.0, 30.0, 1), MinuteLateness(two, 15.0, 40.0, 2)], [one, two]
        )
    )
    assert "(1 run)" in svg and "(2 runs)" in svg and "1 runs" not in svg
