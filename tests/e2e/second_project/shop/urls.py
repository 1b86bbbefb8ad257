from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    # The app's pages under a prefix of this project's choosing.
    path("scheduler/", include("tasks_app.urls")),
    path("admin/", admin.site.urls),
]
