"""The admin site: the product's header, "View site" opening the overview, and the
product's section first on the index."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse_lazy

PRODUCT = "Scheduled tasks"
# The product's own models first on the index and in the sidebar, in this order.
MODEL_ORDER = {"Task": 0, "Run": 1, "TaskAuditEntry": 2}

admin.site.site_header = PRODUCT
admin.site.site_title = PRODUCT
# "View site" opens the overview; lazy, as the URLconf is not loaded when admin.py is.
admin.site.site_url = reverse_lazy("tasks-overview")  # type: ignore[assignment]
_stock_app_list = admin.site.get_app_list


def _app_list_product_first(request: HttpRequest, app_label: str | None = None) -> list[Any]:
    """Django sorts apps by name, which puts ours after tokens, results and beat."""
    apps = _stock_app_list(request, app_label)
    for app in apps:
        if app["app_label"] == "tasks_app":
            app["models"].sort(key=lambda m: MODEL_ORDER.get(m["object_name"], 9))
    return sorted(apps, key=lambda app: app["app_label"] != "tasks_app")


# The default site is built by django.contrib.admin's AppConfig; replacing it would need
# a settings change, so only this one method is overridden on the instance.
admin.site.get_app_list = _app_list_product_first  # type: ignore[method-assign]
