"""Headless Chromium (Debian's ``chromium`` package) driven by Playwright.

Playwright's own browser downloads are never used (``playwright install`` is not run): the
browser is ``/usr/bin/chromium``, which ``.ci/run`` installs with apt when it is missing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Playwright's sync API runs an event loop in this thread; Django's ORM calls made by the
# test itself (fixtures, assertions) are still plain synchronous calls.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENS = Path(__file__).resolve().parents[2] / "bench" / "results" / "screens"
# The screenshots the README shows are taken by tests/browser/test_admin_pages.py.
DOCS = Path(__file__).resolve().parents[2] / "docs"
WIDE = {"width": 1400, "height": 900}  # the width the admin must fit without scrolling


@pytest.fixture(autouse=True)
def _plain_static_storage(settings) -> None:
    """Unhashed static URLs, served from the apps' folders by the test server, so the tests
    need no ``collectstatic`` into the shared tree (the release step does that for real)."""
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does this)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        yield browser
        browser.close()


def _refusals_recorded(page) -> list[str]:
    """Content-Security-Policy refusals the browser reports on this page's console, from
    every page it visits: the pages must work under the policy the server sends."""
    refused: list[str] = []
    page.on(
        "console",
        lambda msg: refused.append(msg.text) if "Content Security Policy" in msg.text else None,
    )
    return refused


@pytest.fixture
def page(browser) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    refused = _refusals_recorded(page)
    yield page
    context.close()
    assert refused == []


@pytest.fixture
def wide_page(browser) -> Iterator[object]:
    """A 1,400 px wide window in UTC+1 (Europe/Paris), so local-time tooltips differ from UTC."""
    context = browser.new_context(viewport=WIDE, timezone_id="Europe/Paris", locale="en-GB")
    page = context.new_page()
    page.set_default_timeout(15_000)
    refused = _refusals_recorded(page)
    yield page
    context.close()
    assert refused == []


@pytest.fixture
def screens() -> Path:
    SCREENS.mkdir(parents=True, exist_ok=True)
    return SCREENS
