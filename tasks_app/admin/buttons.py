"""The POST-only buttons of the task and run pages, wrapped once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.admin import AdminSite
from django.http import HttpResponse
from django.urls import URLPattern, path
from django.views.decorators.http import require_POST


def post_button(site: AdminSite, view: Callable[..., HttpResponse]) -> Callable[..., Any]:
    """``view`` behind the admin login, answering only POST (a GET is a 405: a link or a
    crawler never runs, pauses or retries anything)."""
    return site.admin_view(require_POST(view))


def button_paths(
    site: AdminSite, model: str, views: dict[str, Callable[..., HttpResponse]]
) -> list[URLPattern]:
    """``<object_id>/<button>/`` for each POST-only button of ``model``'s page, named
    ``tasks_app_<model>_<button>`` (``run-now`` → ``tasks_app_task_run_now``)."""
    return [
        path(
            f"<path:object_id>/{button}/",
            post_button(site, view),
            name=f"tasks_app_{model}_{button.replace('-', '_')}",
        )
        for button, view in views.items()
    ]
