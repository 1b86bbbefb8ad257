"""Secret payload fields: write-only once saved.

A payload property whose schema says ``"writeOnly": true`` (JSON Schema's word for a value
that is sent but never returned: the ``http`` action's ``headers``, which carry webhook
credentials, or a property of your own action) is never shown again once saved: the API, the
CLI, the admin and the audit trail show the string ``"set"`` in its place.

Sending ``"set"`` back (a client that read a task, changed another field and wrote the
payload back, or the admin form) keeps the stored value; any other value replaces it; leaving
the property out removes it, as for any payload property. Changing a task is already
reserved to users who may use its action (``tasks_app.permissions``), so changing a secret
needs the action's permission too.

Pure functions over the action's schema: no ORM, no request.
"""

from __future__ import annotations

from typing import Any

from . import actions

SET = "set"


def _secret_schema(action: str) -> dict[str, Any] | None:
    try:
        return actions.get(action).schema
    except KeyError:
        return None


def _walk_mask(value: Any, schema: dict[str, Any]) -> Any:
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(value, dict) or not isinstance(props, dict):
        return value
    out = dict(value)
    for key, sub in props.items():
        if key not in out or not isinstance(sub, dict):
            continue
        out[key] = SET if sub.get("writeOnly") else _walk_mask(out[key], sub)
    return out


def _walk_merge(new: Any, old: Any, schema: dict[str, Any]) -> Any:
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(new, dict) or not isinstance(old, dict) or not isinstance(props, dict):
        return new
    out = dict(new)
    for key, sub in props.items():
        if key not in out or key not in old or not isinstance(sub, dict):
            continue
        if sub.get("writeOnly"):
            if out[key] == SET:
                out[key] = old[key]
        else:
            out[key] = _walk_merge(out[key], old[key], sub)
    return out


def payload_masked(action: str, payload: Any) -> Any:
    """``payload`` with every secret value present replaced by ``"set"``."""
    schema = _secret_schema(action)
    return payload if schema is None else _walk_mask(payload, schema)


def payload_merged(action: str, payload: Any, *, stored_action: str, stored: Any) -> Any:
    """``payload`` as written, with each secret sent as ``"set"`` taken from the stored
    payload (the same action's only: another action's secrets do not carry over)."""
    schema = _secret_schema(action)
    if schema is None or action != stored_action:
        return payload
    return _walk_merge(payload, stored, schema)
