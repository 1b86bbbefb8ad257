from django.contrib import admin
from django.http import HttpRequest, HttpResponseRedirect
from django.templatetags.static import static
from django.urls import include, path


def favicon(request: HttpRequest) -> HttpResponseRedirect:
    """Browsers ask for /favicon.ico on pages that name no icon (the API docs): the admin's."""
    return HttpResponseRedirect(static("tasks_app/favicon.svg"))


urlpatterns = [
    # The app's pages (tasks_app/urls.py); first, as its overview lives under admin/.
    path("", include("tasks_app.urls")),
    path("admin/", admin.site.urls),
    path("favicon.ico", favicon),
]
