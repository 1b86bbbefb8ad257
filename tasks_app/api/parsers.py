"""JSON bodies only, at most ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes, no NUL characters.

DRF reads the request stream itself, bypassing Django's body-size check, so the limit is
enforced here (413). Postgres text and jsonb cannot store U+0000, so a string holding one
is refused as bad input (400) rather than failing in the database (500).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import JSONParser

from .errors import PayloadTooLarge


def contains_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, Mapping):
        return any(contains_nul(k) or contains_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(contains_nul(v) for v in value)
    return False


class LimitedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        request = (parser_context or {}).get("request")
        if request is not None and limit is not None:
            try:
                declared = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                declared = 0
            if declared > limit:
                raise PayloadTooLarge(limit)
        if limit is not None:
            body = stream.read(limit + 1)
            if len(body) > limit:
                raise PayloadTooLarge(limit)
            stream = io.BytesIO(body)
        data = super().parse(stream, media_type, parser_context)
        if contains_nul(data):
            raise ValidationError(
                {"non_field_errors": ["JSON strings must not contain NUL (\\u0000) characters"]}
            )
        return data
