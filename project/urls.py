from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    # The app's pages (tasks_app/urls.py); first, as its overview lives under admin/.
    path("", include("tasks_app.urls")),
    path("admin/", admin.site.urls),
]
