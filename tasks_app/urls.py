"""The app's pages, for a project's ``urls.py``: ``path("", include("tasks_app.urls"))``.

Placed before ``path("admin/", admin.site.urls)`` (the overview lives under the admin's
path, which would otherwise answer it), they serve:

- ``admin/overview/`` (and its health panel): the operators' overview, behind the admin login;
- ``metrics``: Prometheus metrics (``TASKS_METRICS_TOKEN`` / ``TASKS_METRICS_ALLOWED_NETWORKS``);
- ``api/``: the REST API, its OpenAPI schema and docs, and ``api/auth/`` (the session login
  the API docs send anonymous visitors to).

Under a prefix (``path("scheduler/", include("tasks_app.urls"))``) every path moves with it;
the names (``tasks-overview``, ``metrics``, ``api-tasks`` ...) stay.
"""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from .admin.views import overview_health_view, overview_view
from .observability.metrics import metrics_view

urlpatterns = [
    path("admin/overview/", admin.site.admin_view(overview_view), name="tasks-overview"),
    path(
        "admin/overview/health/",
        admin.site.admin_view(overview_health_view),
        name="tasks-overview-health",
    ),
    path("metrics", metrics_view, name="metrics"),
    path("api/auth/", include("rest_framework.urls")),
    path("api/", include("tasks_app.api.urls")),
]
