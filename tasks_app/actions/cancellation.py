"""Whether the run an action serves was asked to stop (``services.run_cancel`` on a running
run), as its worker process knows it.

The worker's lease keeper (``tasks_app.worker.recovery``) looks for requests on the runs its
process holds every ``TASKS_CANCEL_CHECK_SECONDS`` and marks them here; an action polls
``ctx.cancel_requested()`` (or calls ``ctx.raise_if_cancelled()``) between steps, a ``@task``
function ``context.cancel_requested()`` or, without a context, :func:`cancel_requested`
(the run executing in the calling thread; all in ``tasks_app.actions.base``). A run asked
to stop ends ``cancelled`` whatever its action does next: returning, raising (``Cancelled``
or anything else), or being ended with its process ``TASKS_CANCEL_GRACE_SECONDS`` after the
request.
"""

from __future__ import annotations

import threading

_requested: set[str] = set()  # run ids asked to stop, among the runs of this process
_current = threading.local()  # .run_id: the run the calling thread executes


def mark_requested(run_id: str) -> None:
    """The worker saw a cancel request for ``run_id`` (the lease keeper calls this)."""
    _requested.add(run_id)


def requested(run_id: str) -> bool:
    """Whether ``run_id`` was asked to stop, as this process knows it."""
    return run_id in _requested


def begin(run_id: str) -> None:
    """The calling thread starts executing ``run_id``."""
    _current.run_id = run_id


def end(run_id: str) -> None:
    """The calling thread is done with ``run_id``: its request, if any, is forgotten."""
    _requested.discard(run_id)
    if getattr(_current, "run_id", None) == run_id:
        _current.run_id = None


def current_run_id() -> str | None:
    """The run the calling thread executes, if any."""
    return getattr(_current, "run_id", None)
