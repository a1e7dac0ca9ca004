"""Strategies of the built-in kinds: which generic behaviours each kind turns on.

Defaulting and deeper semantic validation per kind come with the next issue; each kind
already has its own place here to grow into.
"""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery import validation
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.registry.meta import now_rfc3339
from genericapi.registry.options import DeleteOptions
from genericapi.registry.strategy import Strategy

from . import defaults, jobs, pods, secrets, services
from . import validation as semantic
from .defaults import pod_status

#: Kinds whose spec changes bump metadata.generation (their strategies do so in kube-apiserver).
GENERATION_KINDS = frozenset({
    ("apps", "Deployment"), ("apps", "ReplicaSet"), ("apps", "StatefulSet"), ("apps", "DaemonSet"),
    ("", "ReplicationController"), ("batch", "Job"), ("batch", "CronJob"),
    ("policy", "PodDisruptionBudget"), ("networking.k8s.io", "NetworkPolicy"),
    ("networking.k8s.io", "Ingress"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
})

#: Kinds whose DELETE answers with the object rather than a success Status.
RETURNS_DELETED_OBJECT = frozenset({("", "Pod"), ("", "Service"), ("", "Namespace")})


class BuiltinStrategy(Strategy):
    """Defaulting, schema validation, object-meta rules and semantic validation of a built-in kind."""

    def default(self, obj: dict[str, Any]) -> None:
        defaults.apply(self.info, obj)
        for key in self._struct_sections():
            if obj.get(key) is None:
                # A non-pointer struct in Go: encoded as {} however empty (kube answers
                # "spec": {} for a Node created without one), in Go's field order.
                obj[key] = {}
                if key == "spec" and "status" in obj:
                    obj["status"] = obj.pop("status")

    def _struct_sections(self) -> tuple[str, ...]:
        """The kind's top-level ``spec``/``status`` fields that are Go structs (not pointers: in
        every built-in kind they are), known from the schema."""
        cached = getattr(self, "_sections", None)
        if cached is None:
            cached = ()
            schemas = self.schemas
            root = schemas.root_schema(self.info.group, self.info.version, self.info.kind) if schemas else None
            if schemas is not None and root is not None:
                props = root.get("properties") or {}
                cached = tuple(key for key in ("spec", "status")
                               if key in props and "properties" in schemas.resolve(props[key]))
            self._sections = cached
        return cached

    def validate(self, obj: dict[str, Any]) -> list[FieldError]:
        errs = self._validate_schema(obj)
        if not errs:
            errs = semantic.validate(self.info, obj)
        return self.validate_meta(obj) + errs

    def validate_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        errs = self._validate_schema(new)
        if not errs:
            errs = semantic.validate_update(self.info, new, old)
        return self.validate_meta(new) + errs

    def _validate_schema(self, obj: dict[str, Any]) -> list[FieldError]:
        if self.schemas is None:
            return []
        info = self.info
        return validation.validate_object(obj, self.schemas, info.group, info.version, info.kind).errors


class NamespaceStrategy(BuiltinStrategy):
    """Namespaces: DNS-1123 label names, the well-known name label, phase Active."""

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


class PodStrategy(BuiltinStrategy):
    """Pods: a new Pod's status is phase Pending with its QoS class (from the defaulted resources)."""

    def prepare_for_create(self, obj: dict[str, Any]) -> None:
        defaults.apply(self.info, obj)  # the QoS class is computed on the defaulted Pod, as in kube
        obj["status"] = pod_status.initial_status(obj, now_rfc3339())

    def check_graceful_delete(self, obj: dict[str, Any], opts: DeleteOptions) -> int | None:
        return pods.grace_period(obj, opts)


class ServiceStrategy(BuiltinStrategy):
    """Services: empty load-balancer status on create; a type change drops what no longer applies."""

    def prepare_for_create(self, obj: dict[str, Any]) -> None:
        services.prepare_for_create(obj)

    def prepare_for_update(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        super().prepare_for_update(new, old)
        services.prepare_for_update(new, old)


class SecretStrategy(BuiltinStrategy):
    """Secrets: ``stringData`` is merged into ``data`` on every write, as kube's decoding does."""

    def default(self, obj: dict[str, Any]) -> None:
        secrets.merge_string_data(obj)
        super().default(obj)


class JobStrategy(BuiltinStrategy):
    """Jobs: the uid-based selector and template labels are generated once the uid exists."""

    def validate(self, obj: dict[str, Any]) -> list[FieldError]:
        jobs.generate_selector(obj)
        return super().validate(obj)


_STRATEGIES: dict[tuple[str, str], type[BuiltinStrategy]] = {
    ("batch", "Job"): JobStrategy,
    ("", "Secret"): SecretStrategy,
    ("", "Namespace"): NamespaceStrategy,
    ("", "Pod"): PodStrategy,
    ("", "Service"): ServiceStrategy,
}


def strategy_for(info: ResourceInfo, schemas: SchemaCatalog) -> Strategy:
    cls = _STRATEGIES.get((info.group, info.kind), BuiltinStrategy)
    strategy = cls(info, schemas)
    strategy.tracks_generation = (info.group, info.kind) in GENERATION_KINDS
    strategy.returns_deleted_object = (info.group, info.kind) in RETURNS_DELETED_OBJECT
    return strategy
