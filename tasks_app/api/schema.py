"""What drf-spectacular cannot infer: a strict serializer refuses unknown keys, so its
request schema says ``additionalProperties: false`` (a generated client then cannot send
a typo such as ``delay`` that the API would refuse)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension


class StrictSerializerExtension(OpenApiSerializerExtension):
    target_class = "tasks_app.api.serializers.StrictSerializerMixin"
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: Any) -> Any:
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        schema["additionalProperties"] = False
        return schema
