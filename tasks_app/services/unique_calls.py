"""Unique calls (docs/flow-control.md): a call that makes a run may carry a key; a second call
of the same task with that key, while the first call's run still waits, gets that run
instead of a new one (``return``), or replaces it (``replace``: debounce, the newest call
wins).

The key comes from the call (``unique_key``, ``unique_for_seconds``, ``on_duplicate`` of the
API, the CLI, the admin's "Run now with...") or, when the call gives none, from its task's
policy (``Task.unique_on``, ``unique_for_seconds``, ``debounce``): the value of a keyword
argument or payload field, or the whole call's arguments (``*``).

How one key is decided: inside a transaction, the key's advisory lock
(``lock_unique_key``), then its holder (``unique_holder``), then, when the call makes a run,
the run written with its key. The partial unique index ``run_unique_waiting_key`` refuses a
second waiting run with one key in any case; the lock lets the second of two racing calls
find the first's run rather than fail, and keeps a window (a key held ``N`` seconds after
the call that made its run, whatever became of that run), which no index can.

Calls without a key never come here: they cost what they cost before.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import transaction

from .. import store
from ..models import RunStatus, Task
from ..runtime.cache_keys import cache_key
from ..runtime.task_framework import resolve
from ..vocabulary import validation

log = logging.getLogger(__name__)

# The calls that got a waiting run instead of a new one, and the waiting runs replaced by a
# newer call, counted in the cache (``tasks_unique_calls_total{outcome}`` in /metrics).
DEDUPLICATED = "deduplicated"
REPLACED = "replaced"
OUTCOMES = (DEDUPLICATED, REPLACED)
# A key longer than a column holds (a long argument, the whole call) is stored as its digest.
DIGEST_PREFIX = "sha256:"


@dataclass(frozen=True)
class UniqueCall:
    """A call's key and what a second call with it does.

    ``for_seconds``: with ``replace`` false, the key is also held that long after the call
    that made its run, whatever became of that run (0: only while the run waits); with
    ``replace`` true (debounce), the new run is due no sooner than that long after the call,
    so a burst of calls makes one run, after the burst has been quiet that long."""

    key: str
    for_seconds: int = 0
    replace: bool = False


def unique_call(
    *, key: Any, for_seconds: Any = None, on_duplicate: Any = None
) -> UniqueCall | None:
    """The call's own :class:`UniqueCall` from what a user gave (``None`` without a key);
    ``ValidationError`` naming ``unique_key``, ``unique_for_seconds`` or ``on_duplicate``.
    A window or an ``on_duplicate`` without a key is refused: it would be ignored."""
    if key is None or key == "":
        for field, given in (("unique_for_seconds", for_seconds), ("on_duplicate", on_duplicate)):
            if given is not None:
                raise ValidationError({field: ["needs a unique_key"]})
        return None
    return UniqueCall(
        key=validation.check_unique_key(key),
        for_seconds=validation.check_unique_for(for_seconds if for_seconds is not None else 0),
        replace=validation.check_on_duplicate(on_duplicate or validation.ON_DUPLICATE_RETURN)
        == validation.ON_DUPLICATE_REPLACE,
    )


def policy_call(task: Task, payload: Any) -> UniqueCall | None:
    """The :class:`UniqueCall` the task's policy gives a call with ``payload`` (the run's
    own, or the task's): ``None`` when the task's calls are not deduplicated, or when the
    call lacks the argument or field its ``unique_on`` names."""
    if not task.unique_on:
        return None
    key = payload_key(task.unique_on, payload)
    if key is None:
        return None
    return UniqueCall(key=key, for_seconds=task.unique_for_seconds, replace=task.debounce)


def payload_key(unique_on: str, payload: Any) -> str | None:
    """The key named by ``unique_on`` in a run's ``payload``: for a ``@task`` function's
    call (``{"task", "args", "kwargs"}``) the argument of that name (by keyword or by
    position) or, for ``*``, all its arguments; for another action, that top-level payload
    field or, for ``*``, the whole payload."""
    if not isinstance(payload, dict):
        return None
    if payload.get("task") is not None and "kwargs" in payload:  # a @task function's call
        args, kwargs = list(payload.get("args") or []), dict(payload.get("kwargs") or {})
        if unique_on == validation.UNIQUE_ON_WHOLE_CALL:
            return _key_of([args, kwargs], whole=True)
        if unique_on in kwargs:
            return _key_of(kwargs[unique_on])
        found = _positional(str(payload["task"]), unique_on, args, kwargs)
        return None if found is _MISSING else _key_of(found)
    if unique_on == validation.UNIQUE_ON_WHOLE_CALL:
        return _key_of(payload, whole=True)
    return _key_of(payload[unique_on]) if unique_on in payload else None


_MISSING = object()


def _positional(path: str, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """The argument ``name`` of the ``@task`` function at ``path`` given by position."""
    try:
        function = resolve(path).func
        bound = inspect.signature(function).bind_partial(*args, **kwargs)
    except (ValueError, TypeError, AttributeError):
        return _MISSING
    return bound.arguments.get(name, _MISSING)


def _key_of(value: Any, *, whole: bool = False) -> str:
    """A value as a key: a text as it is, anything else as canonical JSON; the whole call,
    or a key longer than a column holds, as its digest."""
    text = value if isinstance(value, str) and not whole else _canonical(value)
    if whole or len(text) > validation.UNIQUE_KEY_MAX_LENGTH or not text:
        return DIGEST_PREFIX + hashlib.sha256(text.encode()).hexdigest()
    return text


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def unique_due_at(call: UniqueCall, *, due_at: datetime, now: datetime) -> datetime:
    """When a keyed call's run is due: a debounced call's no sooner than its window after
    the call (each newer call pushes the run it replaces that far)."""
    if call.replace and call.for_seconds:
        return max(due_at, now + timedelta(seconds=call.for_seconds))
    return due_at


def key_take(*, task_id: str, call: UniqueCall, new_run_id: UUID, now: datetime) -> UUID | None:
    """Decide a keyed call of task ``task_id``, inside the caller's transaction (which holds
    the key until it ends): the id of the run the call gets instead of a new one, or
    ``None``: the caller writes its new run ``new_run_id`` with the key (a waiting run that
    held it was replaced: ``cancelled``, its error naming ``new_run_id``)."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("key_take needs a transaction: the key's lock lasts until it ends")
    params = {"task_id": task_id, "key": call.key}
    store.lock_unique_key(**params)
    window = call.for_seconds and not call.replace
    since = now - timedelta(seconds=call.for_seconds) if window else None
    holder = store.unique_holder(**params, since=since)
    if holder is None:
        return None
    if not call.replace:
        _count_on_commit(DEDUPLICATED)
        return UUID(str(holder.run_id))
    if holder.waiting:
        replaced = store.replace_run(run_id=holder.run_id, by_run=new_run_id, now=now)
        if replaced is not None:
            # The task's status follows its runs (as run_lifecycle.task_after_run keeps it).
            store.task_after_run(task_ids=[task_id], run_status=RunStatus.CANCELLED)
            _count_on_commit(REPLACED)
    return None


def _count_on_commit(outcome: str) -> None:
    transaction.on_commit(lambda: count(outcome))


def count(outcome: str) -> None:
    """One more call of ``outcome`` in the cache's counter. Never raises: a cache outage
    must not refuse a call (the count is then short)."""
    key = cache_key(f"unique_calls:{outcome}")
    try:
        cache.add(key, 0, None)
        cache.incr(key)
    except Exception:
        log.warning("could not count a %s call", outcome, exc_info=True)


def counts() -> dict[str, int]:
    """``{outcome: calls}`` since the cache was last emptied (raises when it is away)."""
    found = cache.get_many([cache_key(f"unique_calls:{o}") for o in OUTCOMES])
    return {o: int(found.get(cache_key(f"unique_calls:{o}"), 0)) for o in OUTCOMES}
