"""Putting run messages on the broker: one by one, or a batch on one channel with batched
publisher confirms. No database writes here: callers (``tasks_app.services.run_release``)
mark runs ``queued`` before and hand back the ones whose publish failed.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from types import SimpleNamespace
from typing import Any, cast
from uuid import UUID

from amqp import spec
from amqp.method_framing import frame_writer
from celery import current_app, signals
from kombu import Queue
from kombu.exceptions import OperationalError

from ..conf import app_settings
from ..models import Run
from ..vocabulary.choices import EXECUTE_RUN
from ..vocabulary.validation import NUMERIC_BOUNDS
from . import queues

log = logging.getLogger(__name__)

HARD_LIMIT_GRACE_SECONDS = 5
# A broker that takes a message but never confirms it (a resource alarm) fails the publish
# after this long instead of hanging the caller; the run stays pending (docs/reliability.md).
PUBLISH_CONFIRM_TIMEOUT_SECONDS = 5.0


def send(runs: list[Run], *, now: datetime) -> list[UUID]:
    """Publish messages for ``runs`` (already marked ``queued`` and committed); return the
    ids of those the broker did not take."""
    if not runs:
        return []
    unroutable: list[UUID] = []
    if queues.quorum():
        delayed = {target(r) for r in runs if queues.natively_delayed(_delay(r, now))}
        try:
            failed_queues = (
                queues.prepare_delayed_delivery(current_app, delayed) if delayed else set()
            )
        except Exception:  # no broker: every run goes back to pending, as in the publishers
            log.exception("no broker connection; %d runs stay pending", len(runs))
            return [r.id for r in runs]
        unroutable = [r.id for r in runs if target(r) in failed_queues]
        runs = [r for r in runs if target(r) not in failed_queues]
        if not runs:
            return unroutable
    if len(runs) > 1 and BatchPublisher.supported(current_app):
        return unroutable + _batch_publisher().publish(runs, now=now)
    return unroutable + _send_one_by_one(runs, now=now)


def _delay(run: Run, now: datetime) -> float:
    return (run.starts_at - now).total_seconds()


def target(run: Run) -> str:
    """The queue ``run``'s message goes to: its queue's due lane when its due instant was set
    (``Run.timed``), else its queue (``tasks_app.messaging.queues.lane``)."""
    if run.timed and BatchPublisher.supported(current_app):  # RabbitMQ; see queues.lane
        return queues.lane(run.queue_name)
    return run.queue_name


def _send_one_by_one(runs: list[Run], *, now: datetime) -> list[UUID]:
    sent = 0
    failed: list[UUID] = []
    app = current_app
    try:
        with app.producer_or_acquire() as producer:
            for run in runs:
                try:
                    app.send_task(EXECUTE_RUN, producer=producer, **message_options(run, now=now))
                    sent += 1
                except Exception as exc:  # the broker refused or vanished: hand the run back
                    if (why := queues.explain(exc, run.queue_name)) is None:
                        log.exception("publishing run %s failed; it stays pending", run.id)
                    else:
                        log.error("publishing run %s failed; it stays pending: %s", run.id, why)
                    failed.append(run.id)
    except Exception:
        log.exception("no broker connection; %d runs stay pending", len(runs) - sent)
        failed = [r.id for r in runs[sent:]]
    return failed


def isolate_refused(runs: list[Run], *, now: datetime) -> tuple[list[UUID], dict[UUID, str]]:
    """Publish each of ``runs`` (whose publish failed) once more, one at a time, to tell a
    message the broker refuses (a queue name it rejects, a reserved prefix, an oversized
    name: a channel or encoding error) from a broker that is away.

    Returns ``(failed, refused)``: the runs to hand back for a later release (the broker is
    unreachable: probing stops at the first connection error, so an outage costs one
    attempt, not one per run) and, per refused run, the broker's reason. A queue that
    exists with other arguments than this deployment declares (``tasks_app.messaging.queues.explain``)
    is not the run's fault: its runs stay pending, as docs/operations.md says. A refusal
    closes the channel, so the next run gets a fresh connection.
    """
    app = current_app
    refused: dict[UUID, str] = {}
    held: list[UUID] = []  # a queue declared with other arguments: wait for the operator
    mismatched: set[str] = set()  # probed once per call, the rest of its runs held unprobed
    conn: Any = None
    try:
        for i, run in enumerate(runs):
            if run.queue_name in mismatched:
                held.append(run.id)
                continue
            if conn is None:
                conn = app.connection_for_write()
            transient = (*conn.connection_errors, OperationalError, OSError, TimeoutError)
            try:
                conn.ensure_connection(max_retries=1)
                app.send_task(
                    EXECUTE_RUN, connection=conn, retry=False, **message_options(run, now=now)
                )
            except transient:
                log.warning("no broker connection; %d runs stay pending", len(runs) - i)
                return held + [r.id for r in runs[i:]], refused
            except Exception as exc:  # the broker (or the encoder) refused this message
                if (why := queues.explain(exc, run.queue_name)) is not None:
                    # A deployment-wide mismatch (docs/operations.md): the run waits.
                    log.error("publishing run %s failed; it stays pending: %s", run.id, why)
                    held.append(run.id)
                    mismatched.add(run.queue_name)
                else:
                    refused[run.id] = f"{type(exc).__name__}: {exc}"
                    log.error("the broker refused run %s: %s", run.id, refused[run.id])
                _release(conn)
                conn = None
    finally:
        _release(conn)
    return held, refused


def _release(conn: Any) -> None:
    if conn is not None:
        try:
            conn.release()
        except Exception:  # already broken
            log.debug("closing a publisher connection failed", exc_info=True)


class BatchPublisher:
    """Publishes many run messages on one AMQP channel, confirming them as a batch.

    ``confirm_publish`` in Celery makes every publish wait for its own broker ack (one round
    trip per message). Here the channel is put in confirm mode once, every message of the
    batch is written, then the acks (RabbitMQ acks several at once with ``multiple``) are
    drained. Guarantee is the same — a run counts as sent only once the broker confirmed it —
    at a fraction of the cost (measured in docs/scale.md). Any error drops the connection and
    reports the unconfirmed runs as failed; a message that did reach the broker anyway is
    harmless, the worker's conditional claim ignores duplicates.
    """

    CONFIRM_TIMEOUT = 10.0

    def __init__(self, app: Any) -> None:
        self.app = app
        self._lock = threading.Lock()
        self._conn: Any = None
        self._pid = 0
        self._next_tag = 1
        self._outstanding: dict[int, UUID] = {}
        self._acked: set[UUID] = set()

    @staticmethod
    def supported(app: Any) -> bool:
        return queues.on_rabbitmq(app.conf.broker_write_url or app.conf.broker_url)

    def publish(self, runs: list[Run], *, now: datetime) -> list[UUID]:
        """Publish ``runs``; return the ids the broker did not confirm.

        A connection kept from an earlier batch may have died with the broker (a restart):
        the unconfirmed runs are tried once more on a fresh connection before giving up.
        """
        failed = self._publish_once(runs, now=now)
        if failed:
            retry = set(failed)
            failed = self._publish_once([r for r in runs if r.id in retry], now=now)
        if failed:
            log.warning("%d runs stay pending and are released again", len(failed))
        return failed

    def _publish_once(self, runs: list[Run], *, now: datetime) -> list[UUID]:
        with self._lock:
            self._acked = set()
            try:
                producer = self._producer()
                frames = MessageFrames(producer, lean=self._lean())
                routes: dict[str, dict[str, Any]] = {}
                for run in runs:
                    self._send(producer, frames, run, now=now, routes=routes)
                    self._outstanding[self._next_tag] = run.id
                    self._next_tag += 1
                frames.flush()
                deadline = time.monotonic() + self.CONFIRM_TIMEOUT
                while self._outstanding and time.monotonic() < deadline:
                    self._conn.drain_events(timeout=max(deadline - time.monotonic(), 0.01))
            except Exception as exc:
                if (why := queues.explain(exc)) is None:
                    log.exception("publishing a batch of %d runs failed", len(runs))
                else:
                    log.error("publishing a batch of %d runs failed: %s", len(runs), why)
                self.close()
            if self._outstanding:
                log.error("%d publishes unconfirmed", len(self._outstanding))
                self.close()
            return [r.id for r in runs if r.id not in self._acked]

    def _lean(self) -> bool:
        """Whether a message may be written as a copy of another of its shape: only when
        nothing else would see each publish (Celery's sent events, publish signals)."""
        return not (
            self.app.conf.task_send_sent_event
            or signals.before_task_publish.receivers
            or signals.after_task_publish.receivers
        )

    def _send(
        self,
        producer: Any,
        frames: MessageFrames,
        run: Run,
        *,
        now: datetime,
        routes: dict[str, dict[str, Any]],
    ) -> None:
        """Write ``run``'s message: the one ``send_task`` writes, built by Celery's own
        ``create_task_message`` and ``send_task_message``, with the route of its queue worked
        out once per batch. ``send_task`` does the routing, a task-registry lookup and about
        ten configuration lookups per message: a fifth of the CPU of each of beat's fires
        (docs/scale.md). Messages of one shape (task, queue, priority, due time: every call
        of one ``enqueue_many``) differ only in the run's id, so once Celery has written the
        first, the others are its frames with the id replaced (``MessageFrames``). A message
        for Celery's native delayed delivery (quorum queues) still goes through
        ``send_task``, which routes it."""
        # What message_options reads besides the id (the task's time limit by its id).
        shape = (run.task_id, target(run), run.priority, bool(run.interruptions), run.starts_at)
        if frames.copy(shape, str(run.id)):
            return
        options = message_options(run, now=now)
        queue = cast("str | Queue", options.pop("queue"))
        if queues.natively_delayed(_delay(run, now)):
            frames.flush()
            self.app.send_task(EXECUTE_RUN, producer=producer, retry=False, queue=queue, **options)
            return
        # A Queue: under quorum, a run due within the second, through the default exchange.
        key = queue if isinstance(queue, str) else f"{queue.name} (default exchange)"
        amqp = self.app.amqp
        if (route := routes.get(key)) is None:
            route = routes[key] = amqp.router.route({"queue": queue}, EXECUTE_RUN)
        message = amqp.create_task_message(
            options["task_id"],
            EXECUTE_RUN,
            options["args"],
            eta=options.get("eta"),
            time_limit=options["time_limit"],
            soft_time_limit=options["soft_time_limit"],
            reply_to=self.app.thread_oid,
            create_sent_event=self.app.conf.task_send_sent_event,
            ignore_result=None,  # as send_task: the task's own setting decides
        )
        with frames.recording(shape, str(run.id)):
            amqp.send_task_message(
                producer,
                EXECUTE_RUN,
                message,
                **route,
                priority=options["priority"],
                retry=False,
                confirm_timeout=options["confirm_timeout"],
            )

    def _producer(self) -> Any:
        if self._conn is None or self._pid != os.getpid():
            options = dict(self.app.conf.broker_transport_options or {})
            options["confirm_publish"] = False  # confirms are batched here instead
            conn = self.app.connection_for_write(transport_options=options)
            conn.ensure_connection(max_retries=1)
            channel = conn.default_channel
            channel.confirm_select()
            channel.events["basic_ack"].add(self._on_ack)
            channel.events["basic_nack"].add(self._on_nack)
            self._conn, self._pid, self._next_tag = conn, os.getpid(), 1
            self._outstanding = {}
        return self.app.amqp.Producer(self._conn.default_channel)

    def _settle(self, tag: int, multiple: bool) -> list[UUID]:
        tags = [t for t in self._outstanding if t <= tag] if multiple else [tag]
        return [run_id for t in tags if (run_id := self._outstanding.pop(t, None)) is not None]

    def _on_ack(self, tag: int, multiple: bool) -> None:
        self._acked.update(self._settle(tag, multiple))

    def _on_nack(self, tag: int, multiple: bool) -> None:
        self._settle(tag, multiple)  # not acked: reported as failed

    def close(self) -> None:
        conn, self._conn, self._outstanding = self._conn, None, {}
        if conn is not None:
            try:
                conn.release()
            except Exception:  # already broken
                log.debug("closing the publisher connection failed", exc_info=True)


class MessageFrames:
    """The AMQP frames of a batch's messages, written to the socket in chunks.

    Celery writes the first message of each shape (:meth:`recording`): py-amqp's frames of its
    ``basic.publish`` (method, header and body) are kept instead of sent, with the run id they
    carry. A later message of that shape (:meth:`copy`) is those bytes with its own run's id in
    place of that one: a run id is the 36 characters of a UUID wherever a message carries it
    (the task id and root id headers, the arguments and their repr, the correlation id), so no
    frame changes length. The publishes are written ``CHUNK`` at a time, and the chunk is
    flushed before anything else is written on the channel (a queue's declaration, a message
    Celery sends itself), so the broker counts delivery tags in the order the batch does.
    """

    CHUNK = 256

    def __init__(self, producer: Any, *, lean: bool) -> None:
        self.connection = producer.channel.connection  # py-amqp's
        self.lean = lean
        self.shapes: dict[tuple[object, ...], tuple[bytes, bytes]] = {}
        self.pending: list[bytes] = []

    def copy(self, shape: tuple[object, ...], run_id: str) -> bool:
        """Queue the message of ``run_id`` as a copy of its shape's; False if there is none."""
        found = self.shapes.get(shape)
        if found is None:
            return False
        frames, template_id = found
        self.pending.append(frames.replace(template_id, run_id.encode()))
        if len(self.pending) >= self.CHUNK:
            self.flush()
        return True

    @contextmanager
    def recording(self, shape: tuple[object, ...], run_id: str) -> Iterator[None]:
        """Celery's publish of ``run_id``'s message in this block is kept as ``shape``'s."""
        self.flush()
        if not self.lean:
            yield
            return
        conn, kept = self.connection, bytearray()
        sent = conn.frame_writer
        keep = frame_writer(conn, SimpleNamespace(write=kept.extend))

        def write(kind: int, channel: int, sig: Any, args: Any, content: Any) -> None:
            (keep if sig == spec.Basic.Publish else sent)(kind, channel, sig, args, content)

        conn.frame_writer = write
        try:
            yield
        finally:
            conn.frame_writer = sent
        frames, template_id = bytes(kept), run_id.encode()
        self.pending.append(frames)
        # One set of frames (a body within frame_max), so no frame header splits an id.
        if template_id in frames and len(frames) < conn.frame_max - 8:
            self.shapes[shape] = (frames, template_id)

    def flush(self) -> None:
        if self.pending:
            data, self.pending = b"".join(self.pending), []
            self.connection.transport.write(data)


_publisher: BatchPublisher | None = None


def _batch_publisher() -> BatchPublisher:
    global _publisher
    if _publisher is None or _publisher.app is not current_app._get_current_object():
        _publisher = BatchPublisher(current_app._get_current_object())
    return _publisher


# The attempts of a run that was interrupted go ahead of the queue's backlog: the run had
# reached the front of it once already, and its worker's death should not send it to the back.
INTERRUPTED_RUN_PRIORITY = NUMERIC_BOUNDS["priority"].high


def message_options(run: Run, *, now: datetime) -> dict[str, object]:
    """The Celery message for ``run``: its id, ETA, queue (or its due lane), priority (its own or the task's, or
    ``INTERRUPTED_RUN_PRIORITY`` once the run was interrupted) and time limits."""
    task = run.task
    timeout = task.timeout_seconds or app_settings.DEFAULT_TIMEOUT_SECONDS
    options: dict[str, object] = {
        "args": [str(run.id)],
        "task_id": str(run.id),
        "queue": queues.destination(target(run), delay=_delay(run, now)),
        "priority": INTERRUPTED_RUN_PRIORITY if run.interruptions else run.priority_level,
        "soft_time_limit": timeout,
        "time_limit": timeout + HARD_LIMIT_GRACE_SECONDS,
        "confirm_timeout": PUBLISH_CONFIRM_TIMEOUT_SECONDS,
    }
    if run.starts_at > now:
        options["eta"] = run.starts_at
    return options
