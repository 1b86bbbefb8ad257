"""Django model permissions, reads included: ``view_*`` to read, ``add_*``/``change_*``/
``delete_*`` to write. A view names its model (``perm_model``) and may override the
permissions an action needs (``required_perms``: ``{method: [codename, ...]}``)."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

METHOD_VERBS = {
    "GET": "view",
    "HEAD": "view",
    "OPTIONS": "view",
    "POST": "add",
    "PUT": "change",
    "PATCH": "change",
    "DELETE": "delete",
}


def required_permissions(view: Any, method: str) -> list[str]:
    explicit: dict[str, list[str]] = getattr(view, "required_perms", {}) or {}
    if method in explicit:
        return [f"tasks_app.{codename}" for codename in explicit[method]]
    model = getattr(view, "perm_model", None)
    if model is None:
        return []
    verb = METHOD_VERBS.get(method)
    if verb is None:
        return ["tasks_app.__no_such_permission__"]
    return [f"{model._meta.app_label}.{verb}_{model._meta.model_name}"]


class ModelPermissions(BasePermission):
    """Authenticated, and holding the model permissions the method needs."""

    message = "You do not have permission to perform this action."

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        return bool(user.has_perms(required_permissions(view, request.method or "GET")))
