from __future__ import annotations

from tests.admin.conftest import _plain_static_storage

__all__ = ["_plain_static_storage"]
