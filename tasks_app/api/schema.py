"""What drf-spectacular cannot infer.

- A strict serializer refuses unknown keys, so its request schema says
  ``additionalProperties: false`` (a generated client cannot send a typo such as ``delay``).
- Links: the id a create (or execute, retry) answers with is the path parameter of the
  operations on that task (or run).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular import utils
from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.openapi import AutoSchema

from .. import __version__
from .enum_names import ENUM_NAME_OVERRIDES

# The schema's and the docs page's drf-spectacular settings, the app's own in any project
# (applied to its schema and docs views, whatever the project's SPECTACULAR_SETTINGS say).
SPECTACULAR_SETTINGS: dict[str, Any] = {
    "TITLE": "Scheduled tasks API",
    "DESCRIPTION": "Tasks, schedules and runs. Errors are "
    '`{"error": "<one sentence>", "detail": {"<field>": ["<message>"]}}`.',
    "VERSION": __version__,
    # Swagger UI's files from drf-spectacular-sidecar, served as static files (no CDN).
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # No badge fetched from the public validator (and no request leaving for it).
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": ENUM_NAME_OVERRIDES,
}


def extend_schema(**kwargs: Any) -> Callable[[Any], Any]:
    """drf-spectacular's ``extend_schema`` for a view method, on drf-spectacular's own
    ``AutoSchema`` whatever the project's ``REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"]`` (which
    a project made by ``startproject`` leaves at DRF's: the decorator would build the
    method's schema on that class, and the document could not be generated)."""
    decorate = utils.extend_schema(**kwargs)

    def decorator(method: Any) -> Any:
        if "schema" in getattr(method, "kwargs", {}):  # stacked: built on the first one
            return decorate(method)
        method.schema = AutoSchema  # the base the decorator takes first
        try:
            return decorate(method)
        finally:
            del method.schema

    return decorator


class StrictSerializerExtension(OpenApiSerializerExtension):
    target_class = "tasks_app.api.serializers.StrictSerializerMixin"
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: Any) -> Any:
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        schema["additionalProperties"] = False
        return schema


# Where an id an operation answers with can be used next (OpenAPI links): what lets a
# stateful tester (Schemathesis) or a reader follow create -> read -> act -> delete.
TASK_OPERATIONS = (
    "tasks_retrieve",
    "tasks_update",
    "tasks_partial_update",
    "tasks_destroy",
    "tasks_execute",
    "tasks_schedule",
    "tasks_pause",
    "tasks_resume",
    "tasks_backfill",
    "tasks_preview",
    "tasks_runs_list",
)
RUN_OPERATIONS = ("runs_retrieve", "runs_cancel", "runs_retry")
LINKS = {
    # operationId answering the id: (status, path parameter, operations that take it)
    "tasks_create": ("201", "task_id", TASK_OPERATIONS),
    "tasks_execute": ("202", "run_id", RUN_OPERATIONS),
    "runs_retry": ("202", "run_id", RUN_OPERATIONS),
}


class LinkedSchemaGenerator(SchemaGenerator):
    """drf-spectacular's generator, plus the ``links`` of ``LINKS``."""

    def get_schema(self, request: Any = None, public: bool = False) -> dict[str, Any]:
        schema: dict[str, Any] = super().get_schema(request, public)
        for operation in (op for item in schema["paths"].values() for op in item.values()):
            source = LINKS.get(operation.get("operationId", ""))
            if source is None:
                continue
            status, parameter, targets = source
            operation["responses"][status]["links"] = {
                target: {"operationId": target, "parameters": {parameter: "$response.body#/id"}}
                for target in targets
            }
        return schema
