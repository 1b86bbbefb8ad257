"""A ``ROOT_URLCONF`` as ``django-admin startproject`` writes it: the admin, not the app."""

from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
