"""A project's URLs that forgot ``include("tasks_app.urls")``: the admin alone."""

from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
