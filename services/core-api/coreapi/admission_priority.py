"""The Priority admission plugin (kube-apiserver's ``Priority``, enabled by default).

A new Pod gets ``spec.priority`` (and ``spec.preemptionPolicy``) from the PriorityClass it names, or
from the cluster's global-default class, or priority 0 and PreemptLowerPriority when there is none;
naming a missing class, or stating a priority or policy other than the computed one, is Forbidden.
An update that leaves the two fields out keeps the stored values. On the PriorityClass side it lets
only one class be the global default. Classes are read from the PriorityClass store's watch cache,
as kube reads its informer (a cache miss still asks etcd, so a class created a moment ago resolves).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from genericapi.apimachinery import admission as adm
from genericapi.apimachinery import errors as apierrors
from genericapi.registry.options import ListOptions
from genericapi.registry.store import Store

from .validation.scheduling import SYSTEM_PRIORITY_CLASSES

PRIORITY_CLASSES = ("scheduling.k8s.io", "priorityclasses")
PODS = ("", "pods")

#: Priority of a Pod when no class is named and none is the global default.
DEFAULT_PRIORITY = 0
DEFAULT_PREEMPTION_POLICY = "PreemptLowerPriority"


def system_priority_class_objects() -> list[dict[str, Any]]:
    """The system PriorityClasses as objects to create."""
    return [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
             "value": value, "description": description}
            for name, value, description in SYSTEM_PRIORITY_CLASSES]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def default_class(classes: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The global-default class; when a race left several, the one with the lowest value (as kube)."""
    chosen: dict[str, Any] | None = None
    for pc in classes:
        if pc.get("globalDefault") is True and _is_int(pc.get("value")):
            if chosen is None or chosen["value"] > pc["value"]:
                chosen = pc
    return chosen


def admit_pod_spec(spec: dict[str, Any], resolved: dict[str, Any] | None, named: bool) -> str:
    """Set a new Pod's priority fields from its resolved class; the reason to forbid it, or "".

    ``resolved`` is the named class (``named``) or the global default (None when there is none).
    """
    policy: Any
    if resolved is None:
        name, priority, policy = "", DEFAULT_PRIORITY, DEFAULT_PREEMPTION_POLICY
    else:
        name = str((resolved.get("metadata") or {}).get("name", ""))
        priority = resolved.get("value", 0)
        policy = resolved.get("preemptionPolicy")
    if not named:
        if name:
            spec["priorityClassName"] = name
        else:
            spec.pop("priorityClassName", None)
    given = spec.get("priority")
    if given is not None and given != priority:
        return (f"the integer value of priority ({given}) must not be provided in pod spec; "
                f"priority admission controller computed {priority} from the given PriorityClass name")
    spec["priority"] = priority
    if policy is not None:
        given_policy = spec.get("preemptionPolicy")
        if given_policy is not None and given_policy != policy:
            return (f"the string value of PreemptionPolicy ({given_policy}) must not be provided in pod spec; "
                    f"priority admission controller computed {policy} from the given PriorityClass name")
        spec["preemptionPolicy"] = policy
    return ""


def keep_priority_on_update(spec: dict[str, Any], old_spec: dict[str, Any]) -> None:
    """An update that drops the fields admission set keeps the stored ones (validation then forbids
    any other change to them)."""
    for field in ("priority", "preemptionPolicy"):
        if spec.get(field) is None and old_spec.get(field) is not None:
            spec[field] = old_spec[field]


def default_conflict(operation: str, pc: dict[str, Any], current: dict[str, Any] | None) -> str:
    """Why a PriorityClass write may not happen while ``current`` is the global default, or ""."""
    if pc.get("globalDefault") is not True or current is None:
        return ""
    current_name = (current.get("metadata") or {}).get("name", "")
    if operation == "CREATE" or current_name != (pc.get("metadata") or {}).get("name", ""):
        return f"PriorityClass {current_name} is already marked as default. Only one default can exist"
    return ""


def admission_name(obj: dict[str, Any]) -> str:
    """The name admission errors use: the object's name, else its generateName, else "Unknown"."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    return str(meta.get("name") or meta.get("generateName") or "Unknown")


class Priority:
    """The admission hook; ``classes`` is core-api's PriorityClass store."""

    def __init__(self, classes: Store) -> None:
        self.classes = classes

    def handles(self, operation: str) -> bool:
        return operation in (adm.CREATE, adm.UPDATE)

    def applies_to(self, group: str, resource: str, subresource: str) -> bool:
        """Pods and PriorityClasses only (their main resource): the admission chain skips this plugin
        for anything else."""
        return (group, resource) in (PODS, PRIORITY_CLASSES) and not subresource

    async def admit(self, attrs: adm.Attributes) -> None:
        target, operation, obj = (attrs.group, attrs.resource), attrs.operation, attrs.obj
        if obj is None or attrs.subresource:
            return
        if target == PODS:
            spec = obj.get("spec")
            if not isinstance(spec, dict):
                return  # validation reports the missing spec
            if operation == "CREATE":
                await self._admit_pod(spec, obj)
            elif operation == "UPDATE" and (spec.get("priority") is None or spec.get("preemptionPolicy") is None):
                old_spec = (attrs.old_obj or {}).get("spec")
                if isinstance(old_spec, dict):
                    keep_priority_on_update(spec, old_spec)
        elif target == PRIORITY_CLASSES and operation in ("CREATE", "UPDATE"):
            why = default_conflict(operation, obj, default_class(await self._all_classes()))
            if why:
                raise apierrors.forbidden_error(*PRIORITY_CLASSES, admission_name(obj), why)

    async def _admit_pod(self, spec: dict[str, Any], pod: dict[str, Any]) -> None:
        given = spec.get("priority")
        if (given is not None and not _is_int(given)) or not isinstance(spec.get("preemptionPolicy") or "", str):
            return  # a malformed field: left for validation to report
        class_name = spec.get("priorityClassName")
        if class_name and isinstance(class_name, str):
            resolved = await self._stored(self.classes, "", class_name)
            if resolved is None:
                raise apierrors.forbidden_error(*PODS, admission_name(pod),
                                                f"no PriorityClass with name {class_name} was found")
            why = admit_pod_spec(spec, resolved, named=True)
        elif class_name:
            return  # not a string: validation reports it
        else:
            why = admit_pod_spec(spec, default_class(await self._all_classes()), named=False)
        if why:
            raise apierrors.forbidden_error(*PODS, admission_name(pod), why)

    async def _all_classes(self) -> list[dict[str, Any]]:
        cache = self.classes.cache
        if cache.ready:
            return [c.obj for c in cache.list(self.classes.scope_prefix(""))[0]]
        return [item for item, _raw in (await self.classes.list("", ListOptions())).items]

    @staticmethod
    async def _stored(store: Store, namespace: str, name: str) -> dict[str, Any] | None:
        cached = store.cache.get(store.key(namespace, name)) if store.cache.ready else None
        if cached is not None:
            return cached.obj
        try:
            return await store.get(namespace, name)
        except apierrors.APIError as err:
            if err.code == 404:
                return None
            raise
