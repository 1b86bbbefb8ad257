"""The project's admin site, left as the project made it unless ``TASKS_ADMIN_BRANDING`` is on:
then the product's header and title, "View site" opening the overview, and the product's
section first on the index (the demo project turns it on)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse

from ..conf import app_settings

PRODUCT = "Scheduled tasks"
# The product's own models first on the index and in the sidebar, in this order.
MODEL_ORDER = {"Task": 0, "Run": 1, "QueuePause": 2, "TaskAuditEntry": 3}


class _OverviewUrl:
    """The "View site" link: the overview, looked up when a page is drawn (the URLconf is not
    loaded when admin modules are); the site's root when the project did not include the
    app's URLs, so the admin keeps working without them."""

    def __str__(self) -> str:
        try:
            return reverse("tasks-overview")
        except NoReverseMatch:
            return "/"


def brand(site: admin.AdminSite) -> None:
    """The product's name, "View site" and index order on ``site``. The default site is built
    by django.contrib.admin's AppConfig; replacing it would need a settings change, so its
    attributes are set on the instance."""
    stock_app_list = site.get_app_list

    def app_list_product_first(request: HttpRequest, app_label: str | None = None) -> list[Any]:
        """Django sorts apps by name, which puts ours after tokens, results and beat."""
        apps = stock_app_list(request, app_label)
        for app in apps:
            if app["app_label"] == "tasks_app":
                app["models"].sort(key=lambda m: MODEL_ORDER.get(m["object_name"], 9))
        return sorted(apps, key=lambda app: app["app_label"] != "tasks_app")

    site.site_header = PRODUCT
    site.site_title = PRODUCT
    site.site_url = _OverviewUrl()  # type: ignore[assignment]
    site.get_app_list = app_list_product_first  # type: ignore[method-assign]


if app_settings.ADMIN_BRANDING:
    brand(admin.site)
