"""``DATABASE_RANDOM_PAGE_COST`` (project/settings.py): how it reaches Postgres and what it
refuses, in fresh subprocesses with a clean environment, as a deployment starts (what it does
to the plans: tests/store/test_plans.py)."""

from __future__ import annotations

from django.db import connection

from tests.shared import manage

ENV = {"DJANGO_SECRET_KEY": "test-secret-not-for-production"}
URL = "postgres://app@db.internal:5432/tasks"
SHOW = "from django.db import connection; print(connection.settings_dict['OPTIONS'])"


def test_the_live_connection_prices_a_random_page_read_at_the_default_setting(db) -> None:
    with connection.cursor() as cur:
        cur.execute("SHOW random_page_cost")
        assert cur.fetchone()[0] == "1.1"


def test_the_page_cost_goes_after_the_urls_own_options_and_empty_leaves_the_servers() -> None:
    done = manage("shell", "-c", SHOW, DATABASE_URL=f"{URL}?options=-c%20work_mem%3D8MB", **ENV)
    assert done.returncode == 0, done.stderr
    assert "'options': '-c work_mem=8MB -c random_page_cost=1.1'" in done.stdout
    done = manage("shell", "-c", SHOW, DATABASE_URL=URL, DATABASE_RANDOM_PAGE_COST="", **ENV)
    assert done.returncode == 0, done.stderr
    assert "random_page_cost" not in done.stdout


def test_refuses_a_page_cost_that_is_not_a_positive_number_in_one_line() -> None:
    for bad in ("-1", "cheap", "nan"):
        done = manage("check", DATABASE_URL=URL, DATABASE_RANDOM_PAGE_COST=bad, **ENV)
        assert done.returncode != 0
        assert (
            "ImproperlyConfigured: DATABASE_RANDOM_PAGE_COST must be a positive number or "
            f"empty, not {bad!r}" in done.stderr
        )
