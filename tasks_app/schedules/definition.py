"""The ``Schedule`` type: one task as code declares it (see the package's docstring)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, init=False)
class Schedule:
    """One task, as code declares it: its id and its fields (keywords of the REST API)."""

    id: str
    fields: dict[str, Any] = field(default_factory=dict)

    def __init__(self, id: str, /, **fields: Any) -> None:
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "fields", dict(fields))
