"""How ``manage.py tasks`` prints: aligned tables, and a refusal as one line."""

from __future__ import annotations

from collections.abc import Sequence

from django.core.exceptions import ValidationError

from ...vocabulary import validation


def table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    widths = [
        max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
        for i, h in enumerate(headers)
    ]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += [
        "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
    return "\n".join(lines)


def one_line(exc: Exception) -> str:
    """A refusal as one line: a ``ValidationError`` as ``validation.one_line`` words it,
    any other error's text with its line breaks and runs of spaces made one space."""
    if isinstance(exc, ValidationError):
        return validation.one_line(exc)
    return " ".join(str(exc).split())
