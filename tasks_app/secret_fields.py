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

A secret is bound to where it is sent. An action that names its destination
(``register(secrets_bound_to="url")``: the ``http`` action) keeps its stored secrets only
while that URL stays on the same origin (scheme, host and port). An edit that moves it to
another origin and sends a secret back as ``"set"`` clears that secret; one the action's
schema requires is refused instead (``ValidationError`` on ``payload``, naming it): a user
who may change the URL, but was never told the credential, cannot send it somewhere new.

Pure functions over the action's registration: no ORM, no request.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

from . import actions

SET = "set"
DEFAULT_PORTS = {"http": 80, "https": 443}


def _action(action: str) -> actions.Action | None:
    try:
        return actions.get(action)
    except KeyError:
        return None


def _secret_schema(action: str) -> dict[str, Any] | None:
    found = _action(action)
    return None if found is None else found.schema


def origin(url: Any) -> tuple[str, str, int | None] | None:
    """``(scheme, host, port)`` of ``url``, the default port spelled out and the host in
    lower case; ``None`` for what is not a URL with a host."""
    try:
        parts = urlsplit(str(url))
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    scheme = parts.scheme.lower()
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS.get(scheme)


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


def _walk_drop(value: Any, schema: dict[str, Any], path: str = "") -> tuple[Any, list[str]]:
    """``value`` without the secrets sent as ``"set"``; the paths of the required ones."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(value, dict) or not isinstance(props, dict):
        return value, []
    out, required = dict(value), []
    for key, sub in props.items():
        if key not in out or not isinstance(sub, dict):
            continue
        where = f"{path}.{key}" if path else key
        if sub.get("writeOnly"):
            if out[key] == SET:
                del out[key]
                if key in schema.get("required", ()):
                    required.append(where)
        else:
            out[key], more = _walk_drop(out[key], sub, where)
            required += more
    return out, required


def payload_merged(action: str, payload: Any, *, stored_action: str, stored: Any) -> Any:
    """``payload`` as written, with each secret sent as ``"set"`` taken from the stored
    payload (the same action's only: another action's secrets do not carry over), unless
    the action's destination moved to another origin: those secrets are then cleared, and a
    required one raises ``ValidationError`` naming it."""
    found = _action(action)
    if found is None or action != stored_action:
        return payload
    target = found.secrets_bound_to
    if (
        target is not None
        and isinstance(payload, dict)
        and isinstance(stored, dict)
        and origin(payload.get(target)) != origin(stored.get(target))
    ):
        cleared, required = _walk_drop(payload, found.schema)
        if required:
            raise ValidationError(
                {
                    "payload": [
                        f"{', '.join(required)}: write-only, and kept for the stored {target}'s "
                        f"origin only; {target} now points to another origin, so send "
                        f"{'it' if len(required) == 1 else 'them'} again"
                    ]
                }
            )
        return cleared
    return _walk_merge(payload, stored, found.schema)
