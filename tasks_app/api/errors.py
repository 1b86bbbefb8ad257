"""Every error as ``{"error": "<one sentence>", "detail": {<field>: [<messages>]}}``.

Validation problems (DRF's or the services' Django ``ValidationError``) are 400 with one
entry per field (``non_field_errors`` for the rest), a ``services.ConflictError`` is 409,
a missing object 404, an action the user may not use 403 naming the permission
(``detail.action``), a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` 413, and auth problems
401/403. Anything else is a bug and stays a 500.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from ..services import ConflictError
from ..services.permissions import ActionNotPermitted, OperationNotPermitted

NON_FIELD = "non_field_errors"
# A message or field name longer than this is cut in its middle: messages may quote the
# value they refuse (a megabyte of payload came back as a megabyte of error); the start
# names the field, the end says the rule.
TEXT_LIMIT = 300


def capped(text: str) -> str:
    if len(text) <= TEXT_LIMIT:
        return text
    half = TEXT_LIMIT // 2
    return f"{text[:half]} … ({len(text) - 2 * half} characters cut) … {text[-half:]}"


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"

    def __init__(self, limit: int) -> None:
        super().__init__(f"The request body is larger than the {limit}-byte limit.")


class ErrorSerializer(serializers.Serializer):
    """The shape of every error response (documented in the OpenAPI schema)."""

    error = serializers.CharField(help_text="One sentence saying what went wrong.")
    detail = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Messages by field name; 'non_field_errors' for the request as a whole.",
    )


def flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF/Django error structures (nested dicts and lists) as ``{"a.b": ["message"]}``."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, Mapping):
        for key, value in detail.items():
            name = NON_FIELD if key in ("__all__", NON_FIELD) and not prefix else capped(str(key))
            for sub, messages in flatten(value, f"{prefix}.{name}" if prefix else name).items():
                out.setdefault(sub, []).extend(messages)
    elif isinstance(detail, list | tuple):
        for index, item in enumerate(detail):
            if isinstance(item, Mapping | list | tuple):
                for sub, messages in flatten(
                    item, f"{prefix}.{index}" if prefix else str(index)
                ).items():
                    out.setdefault(sub, []).extend(messages)
            else:
                out.setdefault(prefix or NON_FIELD, []).append(capped(str(item)))
    else:
        out.setdefault(prefix or NON_FIELD, []).append(capped(str(detail)))
    return out


def summary(detail: dict[str, list[str]]) -> str:
    """One sentence for the ``error`` key."""
    if len(detail) == 1:
        ((field, messages),) = detail.items()
        first = messages[0].rstrip(".") if messages else "invalid"
        return (
            f"Invalid input: {first}."
            if field == NON_FIELD
            else f"Invalid input: {field}: {first}."
        )
    return f"Invalid input in {len(detail)} fields: {', '.join(sorted(detail))}."


def error_body(error: str, detail: dict[str, list[str]] | None = None) -> dict[str, Any]:
    return {"error": error, "detail": detail or {}}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DjangoValidationError):
        detail = flatten(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
        return Response(error_body(summary(detail), detail), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, ActionNotPermitted):
        return Response(
            error_body(exc.sentence, {"action": [f"needs the permission {exc.permission}"]}),
            status=status.HTTP_403_FORBIDDEN,
        )
    if isinstance(exc, OperationNotPermitted):
        text = f"{exc.operation} needs {', '.join(exc.missing)}"
        return Response(
            error_body(
                f"You do not have permission to perform this action: {text}.",
                {"permission": [f"{exc.operation} needs {p}" for p in exc.missing]},
            ),
            status=status.HTTP_403_FORBIDDEN,
        )
    if isinstance(exc, ConflictError):
        return Response(error_body(_sentence(capped(str(exc)))), status=status.HTTP_409_CONFLICT)
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response(
            error_body(f"The request body is larger than the {limit}-byte limit."),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        detail = flatten(exc.detail)
        response.data = error_body(summary(detail), detail)
    elif isinstance(exc, exceptions.APIException):
        response.data = error_body(_sentence(str(exc.detail)))
    return response


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    if not text:
        return "Error."
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else f"{text}."
