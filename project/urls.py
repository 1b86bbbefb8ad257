from django.contrib import admin
from django.urls import include, path

from tasks_app.admin.views import overview_health_view, overview_view
from tasks_app.observability.metrics import metrics_view

urlpatterns = [
    path("admin/overview/", admin.site.admin_view(overview_view), name="tasks-overview"),
    path(
        "admin/overview/health/",
        admin.site.admin_view(overview_health_view),
        name="tasks-overview-health",
    ),
    path("admin/", admin.site.urls),
    path("metrics", metrics_view, name="metrics"),
    # Session login for the Swagger UI (/api/docs sends anonymous visitors here and back).
    path("api/auth/", include("rest_framework.urls")),
    path("api/", include("tasks_app.api.urls")),
]
