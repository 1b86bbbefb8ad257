"""Secret payload fields: write-only once saved.

A payload property whose schema says ``"writeOnly": true`` (JSON Schema's word for a value
that is sent but never returned: the ``http`` action's ``headers``, which carry webhook
credentials, or a property of your own action) is never shown again once saved: the API, the
CLI, the admin and the audit trail show the string ``"set"`` in its place.

Sending ``"set"`` back (a client that read a task, changed another field and wrote the
payload back, or the admin form) keeps the stored value; any other value replaces it; leaving
the property out removes it, as for any payload property. Changing a task is already
reserved to users who may use its action (``tasks_app.services.permissions``), so changing a secret
needs the action's permission too.

A secret is bound to where it is sent. An action that names its destination
(``register(secrets_bound_to="url")``: the ``http`` action) keeps its stored secrets only
while that URL stays on the same origin (scheme, host and port). An edit that moves it to
another origin and sends a secret back as ``"set"`` clears that secret; one the action's
schema requires is refused instead (``ValidationError`` on ``payload``, naming it): a user
who may change the URL, but was never told the credential, cannot send it somewhere new.

A run keeps the secrets of the action it was made with (``Run.action``): its own payload is
masked by that action's rules for the run's whole life, however its task changes later. A
secret value never shows in what a run produced either: :func:`scrub` replaces every secret
string of the payload it ran with (as written, and as Python and JSON quote it) by ``***`` in
its output, its error and traceback, and its result, before they are stored, logged or handed
to Celery. Values shorter than :data:`MIN_SCRUBBED` characters are left alone: too short to
be a credential, they would blank out ordinary text.

A run's own payload ("run now with...") may send a stored secret back as ``"set"`` only to
the task's own URL: the same origin and path, the query string free to differ
(:func:`secrets_sent_elsewhere`). Sending it anywhere else changes where the task's
credential goes, which only a user who may change the task may do (``tasks_app.services.permissions``).

Pure functions over the action's registration: no ORM, no request.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

from .. import actions

SET = "set"
SCRUBBED = "***"
MIN_SCRUBBED = 4
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


def destination(url: Any) -> tuple[tuple[str, str, int | None], str] | None:
    """``(origin, path)`` of ``url`` (an empty path is ``/``); ``None`` for what is not a URL
    with a host. Paths are compared as written: another spelling is another path."""
    found = origin(url)
    if found is None:
        return None
    return found, urlsplit(str(url)).path or "/"


def _set_paths(value: Any, stored: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """The write-only properties ``value`` sends back as ``"set"`` that ``stored`` holds."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(value, dict) or not isinstance(stored, dict) or not isinstance(props, dict):
        return []
    found: list[str] = []
    for key, sub in props.items():
        if key not in value or key not in stored or not isinstance(sub, dict):
            continue
        where = f"{path}.{key}" if path else key
        if sub.get("writeOnly"):
            if value[key] == SET:
                found.append(where)
        else:
            found += _set_paths(value[key], stored[key], sub, where)
    return found


def secrets_sent_elsewhere(action: str, payload: Any, *, stored: Any) -> tuple[str, list[str]]:
    """For a run's own ``payload`` of a task whose payload is ``stored``: the property naming
    the destination and the stored secrets ``payload`` sends back as ``"set"``, when it sends
    them to another URL than the stored one (another origin or path; the query string may
    differ); ``("", [])`` otherwise."""
    found = _action(action)
    if found is None or found.secrets_bound_to is None:
        return "", []
    target = found.secrets_bound_to
    carried = _set_paths(payload, stored, found.schema)
    if not carried or not isinstance(payload, dict) or not isinstance(stored, dict):
        return "", []
    if destination(payload.get(target)) == destination(stored.get(target)):
        return "", []
    return target, carried


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


def _walk_secrets(value: Any, schema: dict[str, Any], found: set[str], inside: bool) -> None:
    if inside:
        if isinstance(value, str):
            found.add(value)
        elif isinstance(value, dict):
            for item in value.values():  # a header's value, not its name
                _walk_secrets(item, schema, found, True)
        elif isinstance(value, list):
            for item in value:
                _walk_secrets(item, schema, found, True)
        return
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(value, dict) or not isinstance(props, dict):
        return
    for key, sub in props.items():
        if key in value and isinstance(sub, dict):
            _walk_secrets(value[key], sub, found, bool(sub.get("writeOnly")))


def secret_values(action: str, payload: Any) -> set[str]:
    """The secret strings of ``payload`` by ``action``'s rules: every string held under a
    write-only property (an object's values, a list's items), ``"set"`` aside."""
    schema = _secret_schema(action)
    found: set[str] = set()
    if schema is not None:
        _walk_secrets(payload, schema, found, False)
    found.discard(SET)
    return found


def _spellings(secret: str) -> set[str]:
    """``secret`` as a text may quote it: as is, trimmed, and escaped as Python writes a
    string or its bytes (``Invalid header value b'Bearer x\\n'``) and as JSON does."""
    forms = {secret, secret.strip(), repr(secret)[1:-1], json.dumps(secret)[1:-1]}
    forms.add(json.dumps(secret, ensure_ascii=False)[1:-1])
    for codec in ("utf-8", "latin-1"):
        try:
            forms.add(repr(secret.encode(codec))[2:-1])
        except UnicodeEncodeError:
            pass
    return {f for f in forms if len(f) >= MIN_SCRUBBED}


def scrubber(secrets: Iterable[str]) -> list[str]:
    """Every spelling of ``secrets`` to replace, longest first (a secret inside another is
    replaced after it)."""
    forms: set[str] = set()
    for secret in secrets:
        forms |= _spellings(secret)
    return sorted(forms, key=len, reverse=True)


def scrub(value: Any, forms: list[str]) -> Any:
    """``value`` (a text, or JSON: every string in it, keys included) with each of ``forms``
    (:func:`scrubber`) replaced by ``***``."""
    if not forms:
        return value
    if isinstance(value, str):
        for form in forms:
            if form in value:
                value = value.replace(form, SCRUBBED)
        return value
    if isinstance(value, dict):
        return {scrub(k, forms): scrub(v, forms) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v, forms) for v in value]
    return value
