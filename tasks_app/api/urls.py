"""``/api/...`` routes. No trailing slashes: ``/api/tasks/`` redirects (308)
to ``/api/tasks``, and an unknown path answers a JSON 404 (``navigation.unmatched``)."""

from __future__ import annotations

from django.urls import URLPattern, path, re_path
from rest_framework.permissions import IsAuthenticated

from . import views
from .navigation import DocsView, SchemaView, unmatched
from .schema import LinkedSchemaGenerator

# The schema and its docs page need a signed-in user in any project (drf-spectacular serves
# them to anyone unless SPECTACULAR_SETTINGS says otherwise), signed in as for the API.
SIGNED_IN = {
    "permission_classes": [IsAuthenticated],
    "authentication_classes": views.AUTHENTICATION,
}

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
    path("runs/<str:run_id>", views.RunDetailView.as_view(), name="api-run"),
    path("runs/<str:run_id>/cancel", views.RunCancelView.as_view(), name="api-run-cancel"),
    path("runs/<str:run_id>/retry", views.RunRetryView.as_view(), name="api-run-retry"),
    path("queues", views.QueueListView.as_view(), name="api-queues"),
    path("queues/<str:queue>/pause", views.QueuePauseView.as_view(), name="api-queue-pause"),
    path("queues/<str:queue>/resume", views.QueueResumeView.as_view(), name="api-queue-resume"),
    path(
        "schema",
        SchemaView.as_view(generator_class=LinkedSchemaGenerator, **SIGNED_IN),
        name="api-schema",
    ),
    path(
        "docs",
        DocsView.as_view(url_name="api-schema", **SIGNED_IN),
        name="api-docs",
    ),
    # Last: trailing-slash variants redirect, anything else is a JSON 404.
    re_path(r"^(?P<path>.*)$", unmatched, name="api-unmatched"),
]
