"""The run list's trigger filter names the API and the CLI as such, not "Api" / "Cli"."""

from __future__ import annotations

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_trigger_filter_says_api_and_cli(operator) -> None:
    page = operator.get(reverse("admin:tasks_app_run_changelist")).content.decode()
    assert ">API</a>" in page and ">CLI</a>" in page
    assert ">Api</a>" not in page and ">Cli</a>" not in page
