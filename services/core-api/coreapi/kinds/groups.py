"""Kinds of the small API groups, a few rules each: events.k8s.io Events, discovery EndpointSlices,
policy PodDisruptionBudgets, scheduling PriorityClasses, certificates CSRs, storage classes, CSI
drivers, CSI nodes, CSI storage capacities and volume attachments, node RuntimeClasses, coordination
Leases.

``allow_unconditional_update = False`` marks the kinds whose kube strategy answers false to
AllowUnconditionalUpdate (k8s.io/kubernetes v1.33 pkg/registry/<group>/<kind>/strategy.go; their
status strategies embed the main one): a PUT that names no resourceVersion is refused with kube's
422 instead of replacing whatever is stored."""

from __future__ import annotations

from typing import Any, ClassVar

from genericapi.apimachinery.errors import FieldError

from coreapi.defaults import groups as defaults
from coreapi.defaults import services as service_defaults
from coreapi.validation import scheduling

from . import fieldsets, printers_apps, printers_certificates, printers_core
from .base import BuiltinStrategy


class CertificateSigningRequestStrategy(BuiltinStrategy):
    field_support = fieldsets.CSR_FIELDS
    table_printer = printers_certificates.CSR_PRINTER

    def set_defaults(self, obj: dict[str, Any]) -> None:
        defaults.certificate_signing_request(obj)


class CSIDriverStrategy(BuiltinStrategy):
    allow_unconditional_update = False

    def set_defaults(self, obj: dict[str, Any]) -> None:
        defaults.csi_driver(obj)


class EndpointSliceStrategy(BuiltinStrategy):
    def set_defaults(self, obj: dict[str, Any]) -> None:
        service_defaults.endpoint_slice(obj)


class EventsV1EventStrategy(BuiltinStrategy):
    """events.k8s.io Events: core Events' storage seen through the newer API's field names."""

    field_support = fieldsets.EVENTS_K8S_IO_EVENT_FIELDS
    table_printer = printers_core.EVENTS_K8S_IO_EVENT_PRINTER


class CSINodeStrategy(BuiltinStrategy):
    allow_unconditional_update = False


class CSIStorageCapacityStrategy(BuiltinStrategy):
    allow_unconditional_update = False


class LeaseStrategy(BuiltinStrategy):
    table_printer = printers_apps.LEASE_PRINTER
    allow_unconditional_update = False


class PodDisruptionBudgetStrategy(BuiltinStrategy):
    tracks_generation = True
    allow_unconditional_update = False
    zero_status: ClassVar[tuple[str, ...]] = (
        "disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods")


class PriorityClassStrategy(BuiltinStrategy):
    def set_defaults(self, obj: dict[str, Any]) -> None:
        defaults.priority_class(obj)

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return scheduling.validate_priority_class(obj)

    def validate_kind_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        return scheduling.validate_priority_class_update(new, old)


class RuntimeClassStrategy(BuiltinStrategy):
    allow_unconditional_update = False


class StorageClassStrategy(BuiltinStrategy):
    def set_defaults(self, obj: dict[str, Any]) -> None:
        defaults.storage_class(obj)


class VolumeAttachmentStrategy(BuiltinStrategy):
    allow_unconditional_update = False
