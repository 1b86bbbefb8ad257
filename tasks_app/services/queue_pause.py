"""Pausing a queue: its runs wait, none lost, until it is resumed.

The pause is a row of ``QueuePause`` (the queue's name its key). While it exists the release
does not publish the queue's pending runs (the release rule, ``tasks_app_releasable`` in the store), beat records the
queue's schedule fires ``pending`` (``firing``), and a message of the queue that still
reaches a worker (published before the pause) is refused by ``claim_run`` as
``queue_paused``: the run goes back to ``pending`` and frees the worker's slot at once. Runs
keep their due instant, so their lateness shows once they start; a run's own deadline
(``expires_after_seconds``) still applies. Resuming deletes the row and releases the waiting
runs at once, earliest due first.
"""

from __future__ import annotations

import logging

from django.core.exceptions import ValidationError
from django.db import transaction

from ..models import QueuePause
from ..runtime import clock
from ..vocabulary import validation
from . import permissions
from .run_release import release_due_runs

log = logging.getLogger(__name__)

Actor = permissions.Actor


def _check_name(queue: str, *, known: set[str]) -> str:
    """``queue`` as a name this call may act on, else ``ValidationError`` naming ``queue``."""
    name = (queue or "").strip()
    if not name:
        raise ValidationError({"queue": ["a queue name is required"]})
    if name in known:
        return name
    try:
        validation.check_queue(name)
    except ValidationError as exc:
        raise ValidationError({"queue": exc.messages}) from None
    return name


def queue_pause(*, queue: str, note: str = "", by: Actor = "") -> QueuePause:
    """Pause ``queue`` (one of ``TASKS_QUEUES``): from now on none of its runs starts, and
    none is lost. Pausing a paused queue keeps when and by whom it was paused and replaces
    its note when one is given. Needs ``add_queuepause``."""
    who = permissions.authorize(by, "pause-queue")
    name = _check_name(queue, known=set())
    note = validation.check_pause_note(note)
    with transaction.atomic():
        pause, created = QueuePause.objects.select_for_update().get_or_create(
            queue=name, defaults={"paused_at": clock.now(), "paused_by": who, "note": note}
        )
        if not created and note and note != pause.note:
            pause.note = note
            pause.save(update_fields=["note"])
    if created:
        log.info("queue %s paused by %s", name, who or "-", extra={"queue": name, "by": who})
    return pause


def queue_resume(*, queue: str, by: Actor = "") -> bool:
    """Resume ``queue``: its pause row deleted, then its waiting runs released at once,
    earliest due first (the release pass, not beat's next one). Whether it was paused;
    resuming a queue that is not paused changes nothing. Needs ``delete_queuepause``."""
    who = permissions.authorize(by, "resume-queue")
    name = _check_name(queue, known=set(QueuePause.objects.values_list("queue", flat=True)))
    with transaction.atomic():
        deleted, _ = QueuePause.objects.filter(queue=name).delete()
        if deleted:
            transaction.on_commit(release_due_runs)
    if deleted:
        log.info("queue %s resumed by %s", name, who or "-", extra={"queue": name, "by": who})
    return bool(deleted)
