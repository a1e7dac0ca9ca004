"""``flowcontrol.apiserver.k8s.io/v1``: FlowSchemas and PriorityLevelConfigurations track generation
and carry API Priority and Fairness's defaults and validation."""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery.errors import FieldError

from coreapi.defaults import groups as defaults
from coreapi.validation import flowcontrol

from .base import BuiltinStrategy


class FlowSchemaStrategy(BuiltinStrategy):
    tracks_generation = True

    def set_defaults(self, obj: dict[str, Any]) -> None:
        defaults.flow_schema(obj)

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return flowcontrol.validate_flow_schema(obj)

    def validate_kind_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        return flowcontrol.validate_flow_schema_update(new, old)


class PriorityLevelConfigurationStrategy(BuiltinStrategy):
    tracks_generation = True

    def set_defaults(self, obj: dict[str, Any]) -> None:
        defaults.priority_level_configuration(obj)

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return flowcontrol.validate_priority_level(obj)

    def validate_kind_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        return flowcontrol.validate_priority_level_update(new, old)
