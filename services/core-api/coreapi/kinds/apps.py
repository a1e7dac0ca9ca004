"""The ``apps/v1`` kinds: workload controllers that track generation, default their pod templates,
validate selector against template labels and keep the selector immutable (kube's
``pkg/registry/apps``)."""

from __future__ import annotations

from typing import Any, ClassVar

from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.validation import name_is_dns_label
from genericapi.registry.strategy import NameValidator

from coreapi.defaults import workloads as defaults
from coreapi.validation import workloads

from . import fieldsets, printers_apps
from .base import BuiltinStrategy


class DaemonSetStrategy(BuiltinStrategy):
    tracks_generation = True
    zero_status: ClassVar[tuple[str, ...]] = (
        "currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady")
    table_printer = printers_apps.DAEMON_SET_PRINTER

    def set_defaults(self, obj: dict[str, Any]) -> None:
        defaults.daemon_set(obj)

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return workloads.validate_daemon_set(obj)

    def validate_kind_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        return workloads.validate_daemon_set(new) + workloads.selector_immutable(new, old)


class DeploymentStrategy(BuiltinStrategy):
    tracks_generation = True
    table_printer = printers_apps.DEPLOYMENT_PRINTER

    def set_defaults(self, obj: dict[str, Any]) -> None:
        defaults.deployment(obj)

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return workloads.validate_deployment(obj)

    def validate_kind_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        return workloads.validate_deployment(new) + workloads.selector_immutable(new, old)


class ReplicaSetStrategy(BuiltinStrategy):
    tracks_generation = True
    zero_status: ClassVar[tuple[str, ...]] = ("replicas",)
    field_support = fieldsets.REPLICA_SET_FIELDS
    table_printer = printers_apps.REPLICA_SET_PRINTER

    def set_defaults(self, obj: dict[str, Any]) -> None:
        defaults.replica_set(obj)

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return workloads.validate_replica_set(obj)

    def validate_kind_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        return workloads.validate_replica_set(new) + workloads.selector_immutable(new, old)


class StatefulSetStrategy(BuiltinStrategy):
    tracks_generation = True
    zero_status: ClassVar[tuple[str, ...]] = ("replicas", "availableReplicas")
    table_printer = printers_apps.STATEFUL_SET_PRINTER

    def default_name_validator(self) -> NameValidator:
        return name_is_dns_label  # its pods are named <name>-<ordinal>

    def set_defaults(self, obj: dict[str, Any]) -> None:
        defaults.stateful_set(obj)

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return workloads.validate_stateful_set(obj)

    def validate_kind_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        return workloads.validate_stateful_set_update(new, old)
