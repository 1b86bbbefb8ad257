"""``/api/...`` routes (DESIGN.md §5). No trailing slashes."""

from __future__ import annotations

from django.urls import URLPattern, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from . import views

urlpatterns: list[URLPattern] = [
    path("health", views.HealthView.as_view(), name="api-health"),
    path("actions", views.ActionListView.as_view(), name="api-actions"),
    path("tasks", views.TaskListView.as_view(), name="api-tasks"),
    path("tasks/<str:task_id>", views.TaskDetailView.as_view(), name="api-task"),
    path("tasks/<str:task_id>/execute", views.TaskExecuteView.as_view(), name="api-task-execute"),
    path(
        "tasks/<str:task_id>/schedule", views.TaskScheduleView.as_view(), name="api-task-schedule"
    ),
    path("tasks/<str:task_id>/pause", views.TaskPauseView.as_view(), name="api-task-pause"),
    path("tasks/<str:task_id>/resume", views.TaskResumeView.as_view(), name="api-task-resume"),
    path(
        "tasks/<str:task_id>/backfill", views.TaskBackfillView.as_view(), name="api-task-backfill"
    ),
    path("tasks/<str:task_id>/preview", views.TaskPreviewView.as_view(), name="api-task-preview"),
    path("tasks/<str:task_id>/runs", views.TaskRunsView.as_view(), name="api-task-runs"),
    path("runs", views.RunListView.as_view(), name="api-runs"),
    path("runs/dead", views.DeadRunListView.as_view(), name="api-runs-dead"),
    path("runs/<uuid:run_id>", views.RunDetailView.as_view(), name="api-run"),
    path("runs/<uuid:run_id>/cancel", views.RunCancelView.as_view(), name="api-run-cancel"),
    path("runs/<uuid:run_id>/retry", views.RunRetryView.as_view(), name="api-run-retry"),
    path("schema", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]
