"""The core (``/api/v1``) kinds: each one's defaulting, validation, name rule, printer and field
selectors, as kube-apiserver's ``pkg/registry/core/<kind>`` strategies carry them."""

from __future__ import annotations

from typing import Any, ClassVar

from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.validation import name_is_dns1035_label, name_is_dns_label
from genericapi.registry.meta import now_rfc3339
from genericapi.registry.options import DeleteOptions
from genericapi.registry.strategy import NameValidator

from coreapi import pods as pod_rules
from coreapi import secrets as secret_rules
from coreapi import services as service_rules
from coreapi.defaults import core as core_defaults
from coreapi.defaults import pod_status
from coreapi.defaults import pods as pod_defaults
from coreapi.defaults import services as service_defaults
from coreapi.defaults import workloads as workload_defaults
from coreapi.validation import configdata, podupdate, workloads
from coreapi.validation import pods as pod_validation
from coreapi.validation import services as service_validation

from . import fieldsets, printers_core
from .base import BuiltinStrategy


class ConfigMapStrategy(BuiltinStrategy):
    table_printer = printers_core.CONFIG_MAP_PRINTER

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return configdata.validate_config_map(obj)

    def validate_kind_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        return configdata.validate_config_map_update(new, old)


class EndpointsStrategy(BuiltinStrategy):
    table_printer = printers_core.ENDPOINTS_PRINTER

    def set_defaults(self, obj: dict[str, Any]) -> None:
        service_defaults.endpoints(obj)


class EventStrategy(BuiltinStrategy):
    field_support = fieldsets.EVENT_FIELDS
    table_printer = printers_core.EVENT_PRINTER


class LimitRangeStrategy(BuiltinStrategy):
    def set_defaults(self, obj: dict[str, Any]) -> None:
        core_defaults.limit_range(obj)


class NamespaceStrategy(BuiltinStrategy):
    """Namespaces: DNS-1123 label names, the well-known name label, phase Active."""

    returns_deleted_object = True
    field_support = fieldsets.NAMESPACE_FIELDS
    table_printer = printers_core.NAMESPACE_PRINTER

    def default_name_validator(self) -> NameValidator:
        return name_is_dns_label

    def set_defaults(self, obj: dict[str, Any]) -> None:
        core_defaults.namespace(obj)

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return configdata.validate_namespace(obj)

    def prepare_for_create(self, obj: dict[str, Any]) -> None:
        obj["status"] = {"phase": "Active"}

    def default(self, obj: dict[str, Any]) -> None:
        super().default(obj)
        meta = obj.setdefault("metadata", {})
        name = meta.get("name")
        if name:
            labels = meta.get("labels")
            if not isinstance(labels, dict):
                labels = meta["labels"] = {}
            labels["kubernetes.io/metadata.name"] = name


class NodeStrategy(BuiltinStrategy):
    field_support = fieldsets.NODE_FIELDS
    table_printer = printers_core.NODE_PRINTER

    def set_defaults(self, obj: dict[str, Any]) -> None:
        core_defaults.node(obj)


class PersistentVolumeClaimStrategy(BuiltinStrategy):
    table_printer = printers_core.PVC_PRINTER

    def set_defaults(self, obj: dict[str, Any]) -> None:
        core_defaults.persistent_volume_claim(obj)

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return configdata.validate_pvc(obj)

    def validate_kind_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        return configdata.validate_pvc_update(new, old)


class PersistentVolumeStrategy(BuiltinStrategy):
    table_printer = printers_core.PV_PRINTER

    def set_defaults(self, obj: dict[str, Any]) -> None:
        core_defaults.persistent_volume(obj)


class PodStrategy(BuiltinStrategy):
    """Pods: a new Pod's status is phase Pending with its QoS class (from the defaulted resources)."""

    returns_deleted_object = True
    field_support = fieldsets.POD_FIELDS
    table_printer = printers_core.POD_PRINTER

    def set_defaults(self, obj: dict[str, Any]) -> None:
        pod_defaults.default_pod(obj)

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return pod_validation.validate_pod_create(obj)

    def validate_kind_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        return podupdate.validate_pod_update(new, old)

    def prepare_for_create(self, obj: dict[str, Any]) -> None:
        self.apply_defaults(obj)  # the QoS class is computed on the defaulted Pod, as in kube
        obj["status"] = pod_status.initial_status(obj, now_rfc3339())

    def check_graceful_delete(self, obj: dict[str, Any], opts: DeleteOptions) -> int | None:
        return pod_rules.grace_period(obj, opts)


class PodTemplateStrategy(BuiltinStrategy):
    def set_defaults(self, obj: dict[str, Any]) -> None:
        workload_defaults.pod_template(obj)

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return pod_validation.validate_pod_template_spec(obj.get("template"), "template")


class ReplicationControllerStrategy(BuiltinStrategy):
    tracks_generation = True
    zero_status: ClassVar[tuple[str, ...]] = ("replicas",)
    field_support = fieldsets.REPLICATION_CONTROLLER_FIELDS
    table_printer = printers_core.REPLICATION_CONTROLLER_PRINTER

    def set_defaults(self, obj: dict[str, Any]) -> None:
        workload_defaults.replication_controller(obj)

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return workloads.validate_replication_controller(obj)


class ResourceQuotaStrategy(BuiltinStrategy):
    def set_defaults(self, obj: dict[str, Any]) -> None:
        core_defaults.resource_quota(obj)


class SecretStrategy(BuiltinStrategy):
    """Secrets: ``stringData`` is merged into ``data`` on every write, as kube's decoding does."""

    field_support = fieldsets.SECRET_FIELDS
    table_printer = printers_core.SECRET_PRINTER

    def set_defaults(self, obj: dict[str, Any]) -> None:
        core_defaults.secret(obj)

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return configdata.validate_secret(obj)

    def validate_kind_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        return configdata.validate_secret_update(new, old)

    def default(self, obj: dict[str, Any]) -> None:
        secret_rules.merge_string_data(obj)
        super().default(obj)


class ServiceAccountStrategy(BuiltinStrategy):
    table_printer = printers_core.SERVICE_ACCOUNT_PRINTER


class ServiceStrategy(BuiltinStrategy):
    """Services: empty load-balancer status on create; a type change drops what no longer applies."""

    returns_deleted_object = True
    field_support = fieldsets.SERVICE_FIELDS
    table_printer = printers_core.SERVICE_PRINTER

    def default_name_validator(self) -> NameValidator:
        return name_is_dns1035_label

    def set_defaults(self, obj: dict[str, Any]) -> None:
        service_defaults.service(obj)

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return service_validation.validate_service(obj)

    def validate_kind_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        return service_validation.validate_service_update(new, old)

    def prepare_for_create(self, obj: dict[str, Any]) -> None:
        service_rules.prepare_for_create(obj)

    def prepare_for_update(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        super().prepare_for_update(new, old)
        service_rules.prepare_for_update(new, old)
