"""JSON bodies only, at most ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes, storable as they are.

DRF reads the request stream itself, bypassing Django's body-size check, so the limit is
enforced here (413). What Postgres cannot store, or Python cannot walk (NUL, lone
surrogates, nesting deeper than ``validation.MAX_JSON_DEPTH``; the rules are in
``tasks_app.validation``), is refused for the whole body here (400 naming where it is),
before any serializer walks it.
"""

from __future__ import annotations

import io
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import JSONParser

from ..validation import TOO_DEEP, json_problem, too_deep_at
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
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:  # how deep that is depends on the stack the parser ran on
            stream.seek(0)
            where = too_deep_at(stream.read().decode("utf-8", "replace"))
            raise ValidationError({where or NON_FIELD: [TOO_DEEP]}) from None
        problem = json_problem(data)
        if problem is not None:
            where, what = problem
            raise ValidationError({where or NON_FIELD: [what]})
        return data
