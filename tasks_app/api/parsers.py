"""JSON bodies only, at most ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes, storable as they are.

DRF reads the request stream itself, bypassing Django's body-size check, so the limit is
enforced here (413). What Postgres cannot store, or Python cannot walk, is refused as bad
input (400 naming where it is) rather than failing later with a 500:

- U+0000 (NUL): Postgres text and jsonb cannot hold it;
- a lone surrogate (``"\\ud800"``, legal JSON escape, not Unicode): it cannot be encoded
  as UTF-8 for the database;
- nesting deeper than ``MAX_JSON_DEPTH`` levels: deep enough for any payload, shallow
  enough that validation and serialization never hit Python's recursion limit.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import JSONParser

from .errors import NON_FIELD, PayloadTooLarge

MAX_JSON_DEPTH = 32


def string_problem(text: str) -> str | None:
    if "\x00" in text:
        return "must not contain NUL (\\u0000) characters"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "must not contain lone surrogates (\\ud800-\\udfff): they are not Unicode text"
    return None


def json_problem(value: Any, path: str = "", depth: int = 0) -> tuple[str, str] | None:
    """The first ``(where, what)`` that makes a parsed JSON value unstorable, or None.

    ``where`` is a dotted path (``payload.items.0``); nesting too deep is reported at the
    top-level field it is under."""
    if depth > MAX_JSON_DEPTH:
        return path.split(".")[0] or NON_FIELD, f"nests deeper than {MAX_JSON_DEPTH} levels"
    if isinstance(value, str):
        problem = string_problem(value)
        return None if problem is None else (path or NON_FIELD, problem)
    if isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            problem = string_problem(str(key))
            if problem is not None:
                return (path or NON_FIELD), f"keys {problem}"
            found = json_problem(item, where, depth + 1)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = json_problem(item, f"{path}.{index}" if path else str(index), depth + 1)
            if found is not None:
                return found
    return None


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
        except RecursionError:
            raise ValidationError(
                {NON_FIELD: [f"JSON nests deeper than {MAX_JSON_DEPTH} levels"]}
            ) from None
        problem = json_problem(data)
        if problem is not None:
            where, what = problem
            raise ValidationError({where: [what]})
        return data
