"""``CeleryRunBackend``: Django's task framework backend whose tasks are our runs."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.utils import timezone

from ..celery_defaults import project_app
from ..models import Run
from ..runtime import clock
from ..services.django_task import django_task_enqueue, django_task_enqueue_many
from ..vocabulary.validation import check_run_at, configured_queues, json_value_problem, one_line
from .framework import (
    ACTION,
    DEFAULT_TASK_PRIORITY,
    DEFAULT_TASK_QUEUE_NAME,
    BaseTaskBackend,
    InvalidTask,
    TaskResultDoesNotExist,
    call_problem,
    resolve,
    run_priority,
    stored_json,
    task_enqueued,
)
from .results import enqueued_result, task_result


class CeleryRunBackend(BaseTaskBackend):
    """Each enqueue is a run, executed by the Celery workers; ``get_result`` reads it back.

    ``QUEUES``, if given, narrows the queue names further than ``TASKS_QUEUES`` does (unset:
    Django's ``"default"``, which is the workers' default queue, and every queue of
    ``TASKS_QUEUES``). ``OPTIONS`` takes the keys of :attr:`supported_options` (none yet):
    check ``tasks_app.E005`` refuses any other, which would be ignored.
    """

    supported_options: frozenset[str] = frozenset()
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        if "QUEUES" not in params:
            self.queues = {DEFAULT_TASK_QUEUE_NAME, *configured_queues()}

    def validate_task(self, task: Any) -> None:
        """Django's checks, then ours: ``run_after`` within ``TASKS_MAX_DELAY_SECONDS``."""
        super().validate_task(task)
        if task.run_after is not None and timezone.is_aware(task.run_after):
            now = clock.now()
            try:
                check_run_at(max(task.run_after, now), now=now, field="run_after")
            except ValidationError as exc:
                raise InvalidTask(one_line(exc)) from exc

    def enqueue(self, task: Any, args: Iterable[Any], kwargs: Mapping[str, Any]) -> Any:
        """A run of ``task`` with these arguments, due at ``run_after`` (or now), published
        when the surrounding transaction commits. ``TypeError`` for arguments that would
        not survive JSON or do not fit the function's signature, ``ImproperlyConfigured``
        when the project's Celery app is not loaded; nothing is written then."""
        project_app()
        self.validate_task(task)
        args, kwargs = _call(task, args, kwargs)
        try:
            run = django_task_enqueue(path=task.module_path, args=args, kwargs=kwargs, **_how(task))
        except ValidationError as exc:
            raise InvalidTask(one_line(exc)) from exc
        return self._result(run, task)

    def enqueue_many(
        self, task: Any, calls: Iterable[tuple[Iterable[Any], Mapping[str, Any]]]
    ) -> list[Any]:
        """One run of ``task`` per ``(args, kwargs)`` of ``calls``, written in one statement
        and published in one batch when the surrounding transaction commits; their
        ``TaskResult``s in the order of ``calls``. Each call is checked as :meth:`enqueue`
        checks one, all before any is written: one refused call writes none."""
        project_app()
        self.validate_task(task)
        checked = [_call(task, args, kwargs) for args, kwargs in calls]

        def results(runs: list[Any]) -> list[Any]:
            return [self._result(run, task) for run in runs]

        try:
            return django_task_enqueue_many(
                path=task.module_path, calls=checked, **_how(task), then=results
            )
        except ValidationError as exc:
            raise InvalidTask(one_line(exc)) from exc

    def _result(self, run: Run, task: Any) -> Any:
        """The ``TaskResult`` of an enqueue: of the new run (``task_enqueued`` sent), or,
        for a call deduplicated by its function's policy (docs/flow-control.md), of the run
        that already held its key, read as it is now (no signal: nothing was enqueued)."""
        if run.deduplicated:
            return task_result(run, task=task, backend=self.alias)
        result = enqueued_result(run, task=task, backend=self.alias)
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> Any:
        """The run ``result_id`` and its later attempts as a ``TaskResult``;
        ``TaskResultDoesNotExist`` if there is no such run of a ``@task`` function."""
        try:
            key = uuid.UUID(str(result_id))
        except ValueError:
            raise TaskResultDoesNotExist(f"{result_id!r} is not a run id") from None
        run = Run.objects.select_related("task").filter(pk=key).first()
        if run is None:
            raise TaskResultDoesNotExist(f"no run {result_id}")
        if run.task.action != ACTION:
            raise TaskResultDoesNotExist(
                f"run {result_id} runs action {run.task.action!r}, not a @task function"
            )
        try:
            task = resolve(str(run.call_payload.get("task", "")))
        except ValueError as exc:
            raise TaskResultDoesNotExist(f"run {result_id}: {exc}") from exc
        return task_result(run, task=task, backend=self.alias, result_id=str(result_id))


def _call(
    task: Any, args: Iterable[Any], kwargs: Mapping[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """``args`` and ``kwargs`` as stored (JSON), once they survive JSON and fit the
    function's signature (``TypeError`` naming the argument or the mismatch)."""
    args, kwargs = list(args), dict(kwargs)
    for where, value in (("args", args), ("kwargs", kwargs)):  # depth first: no recursion limit
        if (found := json_value_problem(value, where)) is not None:
            raise TypeError(f"{task.module_path}: {found[0]}: {found[1]}")
    try:
        stored_args = stored_json(list(args), "args")
        stored_kwargs = stored_json(dict(kwargs), "kwargs")
    except TypeError as exc:
        raise TypeError(f"{task.module_path}: {exc}; task arguments must survive JSON") from None
    if (wrong := call_problem(task, stored_args, stored_kwargs)) is not None:
        raise TypeError(wrong)
    return stored_args, stored_kwargs


def _how(task: Any) -> dict[str, Any]:
    """How ``task`` is enqueued: Django's default queue and priority leave the choice to the
    function's task (an operator may set them there); any other is the call's own."""
    default_priority = task.priority == DEFAULT_TASK_PRIORITY
    return {
        "queue": "" if task.queue_name == DEFAULT_TASK_QUEUE_NAME else task.queue_name,
        "priority": None if default_priority else run_priority(task.priority),
        "run_after": task.run_after,
        "using": {
            "priority": task.priority,
            "queue_name": task.queue_name,
            "run_after": task.run_after and task.run_after.isoformat(),
        },
    }


def enqueue_many(task: Any, calls: Iterable[tuple[Iterable[Any], Mapping[str, Any]]]) -> list[Any]:
    """``task.enqueue(*args, **kwargs)`` for each ``(args, kwargs)`` of ``calls``, in one
    statement and one published batch, through ``task``'s backend (``CeleryRunBackend``)::

        enqueue_many(send_welcome_email, [((user.id,), {}) for user in new_users])
    """
    backend = task.get_backend()
    if not isinstance(backend, CeleryRunBackend):
        raise InvalidTask(
            f"enqueue_many needs a CeleryRunBackend; {task.backend!r} is {type(backend).__name__}"
        )
    return backend.enqueue_many(task, calls)
