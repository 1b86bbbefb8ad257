"""The argument types of ``manage.py tasks``: a bad value is a usage error (exit status 2)."""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.core.management.base import CommandError
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from tasks_app.vocabulary import validation

DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d)?\s*$", re.IGNORECASE)
MAX_LIMIT = 10_000  # rows a list prints at most
WAIT_POLL_SECONDS = 0.5  # how often ``tasks wait`` reads the run's outcome
UNIT_SECONDS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, None: 1}


def duration(text: str) -> float:
    """``90s``, ``15m``, ``2h``, ``1d`` or plain seconds."""
    match = DURATION.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 90s, 15m, 2h or 1d")
    unit = match.group(2).lower() if match.group(2) else None
    return float(match.group(1)) * UNIT_SECONDS[unit]


def instant(text: str) -> datetime:
    """ISO 8601 with an offset (``2025-06-01T09:00:00+02:00`` or ``...Z``)."""
    try:
        value = parse_datetime(text.strip())
    except ValueError:
        value = None
    if value is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 date-time")
    if timezone.is_naive(value):
        raise argparse.ArgumentTypeError(f"{text!r} {validation.NAIVE_INSTANT}")
    return value


def json_object(text: str) -> dict[str, Any]:
    """A JSON object, read by ``validation.read_json`` (what it holds is checked by the
    service it goes to, as the field's error: exit status 1)."""
    try:
        value = validation.read_json(text, content=False)
    except validation.JSONProblem as exc:
        raise argparse.ArgumentTypeError(exc.what) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An integer option within ``[low, high]`` (a ``--limit`` of 10**30 is a usage error,
    not a database error)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(validation.between(low, high))
        return value

    return parse


def limit(text: str) -> int | str:
    """A whole number (its bounds are the field's, checked by the service), or ``none``."""
    if text.strip().lower() == "none":
        return "none"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number or 'none'") from None


def argv(text: str) -> list[str]:
    try:
        parts = shlex.split(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"cannot split {text!r}: {exc}") from exc
    if not parts:
        raise argparse.ArgumentTypeError("the command is empty")
    return parts


def whole_seconds(value: float, option: str) -> int:
    """A duration option as the integer field it sets; its bounds are the field's, checked
    (and worded) by the services as for the API and the admin."""
    if value != int(value):
        raise CommandError(
            f"--{option.replace('_', '-')} must be a whole number of seconds", returncode=2
        )
    return int(value)


def is_uuid(text: str) -> bool:
    return bool(re.fullmatch(r"[0-9a-fA-F-]{32,36}", text))
