"""JSON bodies only, at most ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes, storable as they are.

DRF reads the request stream itself, bypassing Django's body-size check, so the limit is
enforced here (413). The body is read by ``validation.read_json``, the one reader of JSON
text every way in shares: what Postgres cannot store, or Python cannot walk (NUL, lone
surrogates, numbers that are not finite, nesting deeper than ``validation.MAX_JSON_DEPTH``)
is refused for the whole body here (400 naming where it is), before any serializer walks
it; text that is not JSON is DRF's ``JSON parse error``.
"""

from __future__ import annotations

import io
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import JSONParser

from ..vocabulary.validation import JSONProblem, read_json
from .errors import NON_FIELD, PayloadTooLarge


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
        try:
            return read_json(
                stream.read(), sized=False
            )  # the limit above; a payload's: the services
        except JSONProblem as exc:
            if exc.unreadable:
                raise ParseError(f"JSON parse error - {exc.what}") from None
            raise ValidationError({exc.where or NON_FIELD: [exc.what]}) from None
