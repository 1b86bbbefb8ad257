"""Who may call a route: each view names the operation of each method (``operations``:
``{"GET": "list", "POST": "create"}``), and ``tasks_app.services.permissions.OPERATION_PERMISSIONS``
says what the operation needs, the same table the services, the admin and the CLI use.
``HEAD`` needs what ``GET`` needs; ``OPTIONS`` what ``GET`` needs, or the view's first method
on a route without ``GET``. A method the view answers but does not name is refused."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from ..services import permissions


def operation_of(view: Any, method: str) -> str | None:
    """The operation ``method`` performs on ``view`` (``None``: the method is not named)."""
    named: dict[str, str] = getattr(view, "operations", {}) or {}
    if method in named:
        return named[method]
    if method == "HEAD":
        return named.get("GET")
    if method == "OPTIONS":
        return named.get("GET") or next(iter(named.values()), None)
    return None


class ModelPermissions(BasePermission):
    """Authenticated, and holding the model permissions the method's operation needs."""

    message = "You do not have permission to perform this action."

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        method = request.method or "GET"
        operation = operation_of(view, method)
        if operation is None:
            # Not named: refused, unless the view does not answer it at all (then a 405).
            return not hasattr(view, method.lower())
        permissions.authorize(user, operation)
        return True
