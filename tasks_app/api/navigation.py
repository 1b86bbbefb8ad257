"""The API's front door for people and for clients that guess URLs.

- ``/api/docs`` (Swagger UI, no inline script) sends an anonymous browser to the login page and back, rather
  than answering a bare 401 (the schema itself, ``/api/schema``, stays a 401 for machines).
- A trailing slash is tolerated: ``/api/tasks/`` answers 308 to ``/api/tasks`` (308 keeps
  the method and the body, so a POST is repeated as a POST).
- Any other path under ``/api/`` answers the JSON error shape with 404, never Django's HTML
  page, so a client always gets a body it can parse.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.urls import Resolver404, resolve, reverse
from drf_spectacular.settings import patched_settings
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework import exceptions
from rest_framework.response import Response

from .errors import error_body, exception_handler
from .schema import SPECTACULAR_SETTINGS, extend_schema


class SchemaView(SpectacularAPIView):
    """The OpenAPI document, with the app's drf-spectacular settings and error shape."""

    custom_settings = SPECTACULAR_SETTINGS

    @extend_schema(exclude=True)  # not an operation of the API it describes
    def get(self, request: Any, *args: Any, **kwargs: Any) -> Response:
        response: Response = super().get(request, *args, **kwargs)
        return response

    def get_exception_handler(self) -> Any:
        return exception_handler


class DocsView(SpectacularSwaggerSplitView):
    """Swagger UI; an anonymous visitor is sent to the login page, then back here.

    The split view: its start-up script is a second request to this URL (``?script=``)
    rather than an inline ``<script>``, so the Content-Security-Policy can allow scripts from
    this origin only (every Swagger UI file comes from drf-spectacular-sidecar)."""

    title = SPECTACULAR_SETTINGS["TITLE"]

    @extend_schema(exclude=True)
    def get(self, request: Any, *args: Any, **kwargs: Any) -> Response:
        with patched_settings(SPECTACULAR_SETTINGS):  # Swagger UI from the sidecar, any project
            response: Response = super().get(request, *args, **kwargs)
            return response

    def options(self, request: Any, *args: Any, **kwargs: Any) -> HttpResponse:
        # DRF's OPTIONS answer is metadata for an API; this page renders HTML only (its
        # renderer cannot write that metadata). Say what the page allows instead.
        response = HttpResponse(status=200)
        response["Allow"] = "GET, HEAD, OPTIONS"
        return response

    def handle_exception(self, exc: Exception) -> Response | HttpResponse:
        if isinstance(exc, exceptions.NotAuthenticated):
            return redirect_to_login(
                self.request.get_full_path(), login_url=reverse("rest_framework:login")
            )
        return super().handle_exception(exc)


class PermanentRedirect308(HttpResponsePermanentRedirect):
    status_code = 308


def unmatched(request: HttpRequest, path: str) -> HttpResponse:
    """``/api/<path>`` that no route matched: redirect a trailing-slash variant, else 404."""
    if path.endswith("/"):
        target = request.path.rstrip("/")  # under whatever prefix the project mounted the API
        try:
            match: Any = resolve(target)
        except Resolver404:
            match = None
        if match is not None and match.func is not unmatched:
            query = request.META.get("QUERY_STRING", "")
            return PermanentRedirect308(f"{target}?{query}" if query else target)
    return JsonResponse(error_body(f"No API route at {request.path}."), status=404)
