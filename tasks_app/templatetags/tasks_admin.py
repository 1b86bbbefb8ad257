"""Template filters for the admin's own pages: the same presentation rules as the Python
side (``tasks_app.admin.views``), so an instant or a badge looks alike everywhere."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils.safestring import SafeString

from ..admin import views as admin_views

register = template.Library()


@register.filter
def instant(value: datetime | None) -> SafeString | str:
    """``{{ run.due_at|instant }}`` → ``2026-11-30 15:35:09 UTC`` with the local time on hover."""
    return admin_views.instant(value)


@register.filter
def badge(status: str) -> SafeString:
    return admin_views.badge(status)
