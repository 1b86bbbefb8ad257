"""How ``manage.py tasks`` prints: aligned tables, and a refusal as one line."""

from __future__ import annotations

from collections.abc import Sequence

from django.core.exceptions import ValidationError


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
    if isinstance(exc, ValidationError):
        if hasattr(exc, "error_dict"):
            parts = [f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items()]
            return "; ".join(parts).replace("__all__: ", "")
        return " ".join(exc.messages)
    return " ".join(str(exc).split())
