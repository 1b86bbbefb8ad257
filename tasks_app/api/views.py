"""API views: validate input, call one service, serialize output.

Every route requires authentication and Django model permissions (``permissions``), except
``/api/health``. Errors are shaped by ``errors.exception_handler``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from django.apps import apps as django_apps
from django.contrib.auth.models import AnonymousUser
from django.db.models import Field
from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
)
from rest_framework import serializers, status
from rest_framework.authentication import BaseAuthentication, SessionAuthentication
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import BasePagination
from rest_framework.permissions import AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import actions, selectors, services
from ..models import Run, RunStatus, Task, Trigger
from ..observability import health
from ..selectors.representations import (
    QueueSerializer,
    RunDetailSerializer,
    RunOutputSerializer,
    TaskCreatedSerializer,
    TaskOutputSerializer,
)
from ..services import permissions
from . import filters, schema  # noqa: F401  (schema: registers the spectacular extension)
from .errors import ErrorSerializer, exception_handler
from .pagination import DEAD_RUN_PAGES, RUN_PAGES, Pagination
from .parsers import LimitedJSONParser
from .route_access import ModelPermissions
from .schema import extend_schema
from .serializers import (
    ActionSerializer,
    BackfillResultSerializer,
    BackfillSerializer,
    EmptySerializer,
    HealthSerializer,
    PauseSerializer,
    PreviewQuerySerializer,
    PreviewSerializer,
    QueuePauseSerializer,
    RunFilterSerializer,
    RunNowSerializer,
    ScheduleSerializer,
    TaskCreateSerializer,
    TaskFieldsSerializer,
    TaskFilterSerializer,
    action_data,
)
from .throttling import AnonThrottle, ThrottledFirst, UserThrottle

ERROR_TEXT = {
    400: "Invalid input: a body field, a query parameter or a path parameter "
    "(detail names each one).",
    401: "Not authenticated (no or bad credentials).",
    403: "Authenticated, but lacking the model permission, or the permission the task's "
    "action needs (tasks_app.use_action_<action>; the error names it).",
    404: "No such task or run (or a page past the last one).",
    409: "The request conflicts with the current state.",
    413: "The request body is over the size limit.",
    415: "The body is not JSON.",
    429: "Too many requests; retry after the Retry-After header's seconds.",
}


def errors(*codes: int, auth: bool = True) -> dict[int, OpenApiResponse]:
    """The documented error responses of an operation: the given codes, plus those every
    route can answer (400 for a NUL character in any parameter, 429 when throttled, and
    401/403 on authenticated routes)."""
    common = (400, 429, 401, 403) if auth else (429,)
    return {
        code: OpenApiResponse(ErrorSerializer, description=ERROR_TEXT[code])
        for code in sorted({*codes, *common})
    }


BODY_ERRORS = (400, 413, 415)
TASK_ID = OpenApiParameter(
    "task_id",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description="The task's id (letters, digits, '-', '_' and '.').",
)
RUN_ID = OpenApiParameter(
    "run_id",
    OpenApiTypes.UUID,
    OpenApiParameter.PATH,
    description="The run's id (a UUID; anything else is a 400 naming run_id).",
)


def _authentication() -> list[type[BaseAuthentication]]:
    """How an API caller signs in, in any project: the app's tokens (``manage.py api_token``;
    first, so an anonymous call is a 401 with ``WWW-Authenticate: Token``), or the admin's
    session. Not the project's ``REST_FRAMEWORK`` defaults, which may not know the tokens.
    Without knox installed (check ``tasks_app.E003`` says so) the session alone: importing
    knox's model would stop every process before the check could speak."""
    if not django_apps.is_installed("knox"):
        return [SessionAuthentication]
    from knox.auth import TokenAuthentication

    return [TokenAuthentication, SessionAuthentication]


AUTHENTICATION = _authentication()


class ApiView(ThrottledFirst, APIView):
    """Base of the API's views. Authentication, permissions, parsing, rendering, paging, the
    schema and the error shape are the app's own, not left to the project's
    ``REST_FRAMEWORK`` defaults (a project made by ``startproject`` has none, and DRF's
    permission default is ``AllowAny``): installed in any project, the API takes its own
    tokens and refuses a user without the model permission. The throttle rates stay the
    project's."""

    authentication_classes = AUTHENTICATION
    permission_classes = [ModelPermissions]
    parser_classes = [LimitedJSONParser]
    renderer_classes = [JSONRenderer]
    throttle_classes = [UserThrottle, AnonThrottle]
    # Lists are paginated; naming the class here also makes the schema show the envelope.
    pagination_class: Callable[[], BasePagination] = Pagination
    # The operation of each method (``tasks_app.services.permissions.OPERATION_PERMISSIONS``).
    operations: dict[str, str] = {}
    schema = AutoSchema()

    def get_exception_handler(self) -> Any:
        return exception_handler

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        # Postgres cannot compare against a NUL character: refuse it as bad input.
        for name, value in [*kwargs.items(), *request.query_params.items()]:
            if "\x00" in str(value) or "\x00" in str(name):
                raise ValidationError(
                    {str(name).replace("\x00", ""): ["must not contain NUL characters"]}
                )

    @property
    def by(self) -> Any:
        """The user, for the services: they decide what the user may do."""
        return self.request.user

    def task(self, task_id: str) -> Task:
        return get_object_or_404(Task.objects.select_related("state"), pk=task_id)

    def run(self, run_id: str) -> Run:
        try:
            pk = UUID(run_id)
        except ValueError:
            raise ValidationError({"run_id": ["must be a UUID"]}) from None
        return get_object_or_404(Run.objects.select_related("task"), pk=pk)

    def body(self, serializer_class: type[serializers.Serializer], **kwargs: Any) -> dict[str, Any]:
        serializer = serializer_class(data=self.request.data, **kwargs)
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)

    def page(self, qs: Any, serializer_class: type[serializers.Serializer]) -> Response:
        paginator = self.pagination_class()
        items = paginator.paginate_queryset(qs, self.request, view=self)
        return paginator.get_paginated_response(serializer_class(items, many=True).data)


# -- health and actions -------------------------------------------------------------------


class HealthView(APIView):
    """The one route open to anonymous callers (load balancers, uptime checks).

    Anonymous callers learn which part is down, never why: an error message can name an
    internal host, port or database role. Authenticated staff also get each check's error.
    Bad credentials here are not a 401: the caller is answered as anonymous."""

    authentication_classes = AUTHENTICATION
    permission_classes = [AllowAny]
    throttle_classes = [AnonThrottle]
    renderer_classes = [JSONRenderer]
    schema = AutoSchema()

    def perform_authentication(self, request: Request) -> None:
        try:
            request.user  # noqa: B018  (authenticates the request)
        except Exception:  # bad credentials, or the database is down: answer as anonymous
            request.user = AnonymousUser()

    @extend_schema(
        auth=[],
        operation_id="health",
        summary="Health of database, broker, cache, beat and workers",
        responses={
            200: HealthSerializer,
            503: OpenApiResponse(
                HealthSerializer, description="Something is down; 'down' names it."
            ),
            **errors(auth=False),
        },
    )
    def get(self, request: Request) -> Response:
        checks = health.check_all()
        down = [
            name for name, check in checks.items() if not check.ok and name not in health.ADVISORY
        ]
        body: dict[str, Any] = {"status": "down" if down else "ok", "down": down}
        if down:
            body["error"] = f"Unhealthy: {', '.join(down)} down."
        details = permissions.sees_health_details(request.user)
        body.update({name: check.as_dict(details=details) for name, check in checks.items()})
        try:
            body["alarms"] = selectors.tasks_in_alarm().count()
        except Exception:  # the database is down: already reported above
            body["alarms"] = None
        return Response(
            body, status=status.HTTP_503_SERVICE_UNAVAILABLE if down else status.HTTP_200_OK
        )


class ActionListView(ApiView):
    operations = {"GET": "actions"}

    @extend_schema(
        summary="Registered actions and their payload schemas",
        responses={200: ActionSerializer(many=True), **errors(404)},
    )
    def get(self, request: Request) -> Response:
        return self.page([action_data(a) for a in actions.all_actions()], ActionSerializer)


# -- tasks ---------------------------------------------------------------------------------


class TaskListView(ApiView):
    operations = {"GET": "list", "POST": "create"}

    @extend_schema(
        summary="List tasks",
        parameters=[TaskFilterSerializer],
        responses={200: TaskOutputSerializer(many=True), **errors(400, 404)},
    )
    def get(self, request: Request) -> Response:
        return self.page(
            filters.filter_tasks(Task.objects.select_related("state"), request.query_params),
            TaskOutputSerializer,
        )

    @extend_schema(
        summary="Create a task (optionally with its schedule, or one run via delay_seconds/run_at)",
        request=TaskCreateSerializer,
        responses={201: TaskCreatedSerializer, **errors(*BODY_ERRORS, 409)},
        examples=[
            OpenApiExample(
                "A reminder in 15 minutes",
                value={
                    "id": "reminder-001",
                    "action": "echo",
                    "payload": {"message": "stand up"},
                    "delay_seconds": 900,
                },
                request_only=True,
            ),
            OpenApiExample(
                "Every weekday at nine in Berlin",
                value={
                    "id": "daily-report",
                    "action": "echo",
                    "payload": {"message": "report"},
                    "schedule_type": "cron",
                    "cron": "0 9 * * mon-fri",
                    "timezone": "Europe/Berlin",
                },
                request_only=True,
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.body(TaskCreateSerializer)
        task_id = data.pop("id", None)
        one_off = {
            k: data.pop(k)
            for k in ("delay_seconds", "expires_in_seconds", "expires_at")
            if k in data
        }
        if data.get("schedule_type", "none") == "none" and data.get("run_at") is not None:
            one_off["run_at"] = data.pop("run_at")
        task, run = services.task_create_with_run(id=task_id, by=self.by, fields=data, **one_off)
        return Response(
            TaskCreatedSerializer(task, context={"run": run}).data, status=status.HTTP_201_CREATED
        )


@extend_schema(parameters=[TASK_ID])
class TaskDetailView(ApiView):
    operations = {"GET": "get", "PUT": "update", "PATCH": "update", "DELETE": "delete"}

    @extend_schema(summary="Get a task", responses={200: TaskOutputSerializer, **errors(404)})
    def get(self, request: Request, task_id: str) -> Response:
        return Response(TaskOutputSerializer(self.task(task_id)).data)

    @extend_schema(
        summary="Replace a task's fields (omitted fields take their defaults)",
        request=TaskFieldsSerializer,
        responses={200: TaskOutputSerializer, **errors(*BODY_ERRORS, 404)},
    )
    def put(self, request: Request, task_id: str) -> Response:
        task = self.task(task_id)
        data = self.body(TaskFieldsSerializer)
        full = {name: _default(name) for name in services.TASK_FIELDS}
        full.update(data)
        task = services.task_update(task=task, data=full, by=self.by)
        return Response(TaskOutputSerializer(task).data)

    @extend_schema(
        summary="Change some of a task's fields",
        request=TaskFieldsSerializer,
        responses={200: TaskOutputSerializer, **errors(*BODY_ERRORS, 404)},
    )
    def patch(self, request: Request, task_id: str) -> Response:
        task = self.task(task_id)
        data = self.body(TaskFieldsSerializer, partial=True)
        task = services.task_update(task=task, data=data, by=self.by)
        return Response(TaskOutputSerializer(task).data)

    @extend_schema(
        summary="Delete a task, its schedule and its runs", responses={204: None, **errors(404)}
    )
    def delete(self, request: Request, task_id: str) -> Response:
        services.task_delete(task=self.task(task_id), by=self.by)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(parameters=[TASK_ID])
class TaskExecuteView(ApiView):
    operations = {"POST": "execute"}

    @extend_schema(
        operation_id="tasks_execute",
        summary="Run the task now, with its payload or another",
        request=RunNowSerializer,
        examples=[
            OpenApiExample("With the task's payload", value={}, request_only=True),
            OpenApiExample(
                "A @task function with other arguments",
                value={"payload": {"task": "myapp.tasks.send_welcome_email", "args": [42]}},
                request_only=True,
            ),
        ],
        responses={
            202: RunOutputSerializer,
            200: OpenApiResponse(
                RunOutputSerializer,
                description="The run that already held the call's unique_key (nothing new).",
            ),
            **errors(*BODY_ERRORS, 404),
        },
    )
    def post(self, request: Request, task_id: str) -> Response:
        task = self.task(task_id)
        body = self.body(RunNowSerializer)
        run = services.task_execute(task=task, trigger=Trigger.API, by=self.by, **body)
        return _made(run)


@extend_schema(parameters=[TASK_ID])
class TaskScheduleView(ApiView):
    operations = {"POST": "schedule"}

    @extend_schema(
        operation_id="tasks_schedule",
        summary="One run after delay_seconds or at run_at, or set a recurring schedule",
        request=ScheduleSerializer,
        examples=[
            OpenApiExample("One run in 90 s", value={"delay_seconds": 90}, request_only=True),
            OpenApiExample(
                "Every 5 minutes",
                value={"schedule_type": "interval", "interval_seconds": 300},
                request_only=True,
            ),
        ],
        responses={
            202: PolymorphicProxySerializer(
                component_name="ScheduleResult",
                serializers=[RunOutputSerializer, TaskOutputSerializer],
                resource_type_field_name=None,
            ),
            **errors(*BODY_ERRORS, 404),
        },
        description="A one-off run answers with the run; a recurring schedule with the task.",
    )
    def post(self, request: Request, task_id: str) -> Response:
        task = self.task(task_id)
        data = self.body(ScheduleSerializer)
        if "schedule_type" in data:
            task = services.task_update(task=task, data=data, by=self.by)
            return Response(TaskOutputSerializer(task).data, status=status.HTTP_202_ACCEPTED)
        run = services.task_schedule_once(task=task, by=self.by, **data)
        return _made(run)


def _made(run: Run) -> Response:
    """A call's run: 202 for a new one, 200 for the run that already held the call's
    unique key (``deduplicated``: nothing new was made)."""
    made = status.HTTP_200_OK if run.deduplicated else status.HTTP_202_ACCEPTED
    return Response(RunOutputSerializer(run).data, status=made)


@extend_schema(parameters=[TASK_ID])
class TaskPauseView(ApiView):
    operations = {"POST": "pause"}

    @extend_schema(
        operation_id="tasks_pause",
        summary="Pause: no new fires; delayed runs wait",
        request=PauseSerializer,
        responses={200: TaskOutputSerializer, **errors(*BODY_ERRORS, 404)},
    )
    def post(self, request: Request, task_id: str) -> Response:
        task = self.task(task_id)
        data = self.body(PauseSerializer)
        return Response(
            TaskOutputSerializer(services.task_pause(task=task, note=data["note"], by=self.by)).data
        )


@extend_schema(parameters=[TASK_ID])
class TaskResumeView(ApiView):
    operations = {"POST": "resume"}

    @extend_schema(
        operation_id="tasks_resume",
        summary="Resume (fires missed while paused are not replayed)",
        request=None,
        responses={200: TaskOutputSerializer, **errors(404)},
    )
    def post(self, request: Request, task_id: str) -> Response:
        task = self.task(task_id)
        return Response(TaskOutputSerializer(services.task_resume(task=task, by=self.by)).data)


@extend_schema(parameters=[TASK_ID])
class TaskBackfillView(ApiView):
    operations = {"POST": "backfill"}

    @extend_schema(
        operation_id="tasks_backfill",
        summary="One run for each fire in (start, end]",
        request=BackfillSerializer,
        responses={202: BackfillResultSerializer, **errors(*BODY_ERRORS, 404)},
    )
    def post(self, request: Request, task_id: str) -> Response:
        task = self.task(task_id)
        data = self.body(BackfillSerializer)
        runs = services.task_backfill(task=task, start=data["start"], end=data["end"], by=self.by)
        body = {"created": len(runs), "runs": RunOutputSerializer(runs, many=True).data}
        return Response(body, status=status.HTTP_202_ACCEPTED)


@extend_schema(parameters=[TASK_ID])
class TaskPreviewView(ApiView):
    operations = {"GET": "preview"}

    @extend_schema(
        operation_id="tasks_preview",
        summary="The next fire times of the task's schedule",
        parameters=[PreviewQuerySerializer],
        responses={200: PreviewSerializer, **errors(400, 404)},
    )
    def get(self, request: Request, task_id: str) -> Response:
        task = self.task(task_id)
        query = PreviewQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        fires = selectors.task_preview(task=task, count=query.validated_data["count"])
        return Response(
            {
                "task": task.id,
                "timezone": task.timezone,
                "fires": [{"utc": f.utc, "local": f.local.isoformat()} for f in fires],
            }
        )


@extend_schema(parameters=[TASK_ID])
class TaskRunsView(ApiView):
    pagination_class = RUN_PAGES
    operations = {"GET": "task_runs"}

    @extend_schema(
        summary="The task's run history",
        parameters=[RunFilterSerializer],
        responses={200: RunOutputSerializer(many=True), **errors(400, 404)},
    )
    def get(self, request: Request, task_id: str) -> Response:
        task = self.task(task_id)
        return self.page(
            filters.filter_runs(task.runs.all(), request.query_params), RunOutputSerializer
        )


# -- runs ----------------------------------------------------------------------------------


class RunListView(ApiView):
    operations = {"GET": "runs"}
    pagination_class = RUN_PAGES

    @extend_schema(
        summary="List runs",
        parameters=[RunFilterSerializer],
        responses={200: RunOutputSerializer(many=True), **errors(400, 404)},
    )
    def get(self, request: Request) -> Response:
        return self.page(
            filters.filter_runs(Run.objects.all(), request.query_params), RunOutputSerializer
        )


class DeadRunListView(ApiView):
    operations = {"GET": "runs"}
    pagination_class = DEAD_RUN_PAGES  # as selectors.run_list_dead: latest death first

    @extend_schema(
        summary="Dead runs: failed after their last retry, or expired",
        parameters=[RunFilterSerializer],
        responses={200: RunOutputSerializer(many=True), **errors(400, 404)},
    )
    def get(self, request: Request) -> Response:
        qs = filters.filter_runs(Run.objects.all(), request.query_params, dead=True)
        return self.page(qs, RunOutputSerializer)


@extend_schema(parameters=[RUN_ID])
class RunDetailView(ApiView):
    operations = {"GET": "runs"}

    @extend_schema(
        summary="Get a run, with the outcome of all its attempts",
        responses={200: RunDetailSerializer, **errors(404)},
    )
    def get(self, request: Request, run_id: str) -> Response:
        run = self.run(run_id)
        try:
            outcome = selectors.run_outcome(run=run)
        except Run.DoesNotExist as exc:  # deleted with its task since it was read
            raise Http404(str(exc)) from exc
        run = outcome.current(run)
        return Response(RunDetailSerializer(run, context={"outcome": outcome}).data)


@extend_schema(parameters=[RUN_ID])
class RunCancelView(ApiView):
    operations = {"POST": "cancel"}

    @extend_schema(
        operation_id="runs_cancel",
        summary="Cancel a run: a pending or queued one at once (200), a running one is asked "
        "to stop (202, cancel_requested_at set; it ends 'cancelled')",
        request=None,
        responses={200: RunOutputSerializer, 202: RunOutputSerializer, **errors(404, 409)},
    )
    def post(self, request: Request, run_id: str) -> Response:
        run = services.run_cancel(run=self.run(run_id), by=self.by)
        asked = run.status == RunStatus.RUNNING
        return Response(
            RunOutputSerializer(run).data,
            status=status.HTTP_202_ACCEPTED if asked else status.HTTP_200_OK,
        )


@extend_schema(parameters=[RUN_ID])
class RunRetryView(ApiView):
    operations = {"POST": "retry"}

    @extend_schema(
        operation_id="runs_retry",
        summary="A new attempt of a failed, expired or cancelled run",
        request=None,
        responses={202: RunOutputSerializer, **errors(404, 409)},
    )
    def post(self, request: Request, run_id: str) -> Response:
        run = services.run_retry(run=self.run(run_id), by=self.by)
        return Response(RunOutputSerializer(run).data, status=status.HTTP_202_ACCEPTED)


# -- queues --------------------------------------------------------------------------------

QUEUE = OpenApiParameter(
    "queue",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description="The queue's name: one of TASKS_QUEUES (anything else is a 400 naming queue).",
)


class QueueListView(ApiView):
    operations = {"GET": "queues"}

    @extend_schema(
        summary="Queues: paused or not, and the runs waiting on each",
        responses={200: QueueSerializer(many=True), **errors(404)},
    )
    def get(self, request: Request) -> Response:
        return self.page(selectors.queue_list(), QueueSerializer)


def _queue(name: str) -> Any:
    return QueueSerializer(selectors.queue_state(name)).data


@extend_schema(parameters=[QUEUE])
class QueuePauseView(ApiView):
    operations = {"POST": "pause-queue"}

    @extend_schema(
        operation_id="queues_pause",
        summary="Pause a queue: none of its runs starts, none is lost, until it is resumed",
        request=QueuePauseSerializer,
        responses={200: QueueSerializer, **errors(*BODY_ERRORS, 404)},
    )
    def post(self, request: Request, queue: str) -> Response:
        data = self.body(QueuePauseSerializer)
        pause = services.queue_pause(queue=queue, note=data["note"], by=self.by)
        return Response(_queue(pause.queue))


@extend_schema(parameters=[QUEUE])
class QueueResumeView(ApiView):
    operations = {"POST": "resume-queue"}

    @extend_schema(
        operation_id="queues_resume",
        summary="Resume a queue: its waiting runs are released at once, earliest due first",
        request=None,
        responses={200: QueueSerializer, **errors(404)},
    )
    def post(self, request: Request, queue: str) -> Response:
        services.queue_resume(queue=queue, by=self.by)
        return Response(_queue(queue.strip()))


def _default(name: str) -> Any:
    field = Task._meta.get_field(name)
    return field.get_default() if isinstance(field, Field) else None


__all__ = ["EmptySerializer", "HealthView"]
