"""``pods/binding`` and ``bindings``: what a scheduler posts to put a Pod on a node.

kube's ``BindingREST`` writes the Pod straight through storage (beneath the Pod strategy, which
would refuse a spec.nodeName change): it sets ``spec.nodeName``, merges the Binding's
annotations and sets the ``PodScheduled`` condition to True, once, only for a Pod that is not
assigned, not being deleted and has no scheduling gates. The Binding's metadata.uid and
resourceVersion are preconditions. A refused binding is a 409 Conflict on ``pods/binding``; a
Binding that fails validation is the plain (500) error kube gives, since kube validates it with
``ValidatePodBinding`` outside a strategy and returns the aggregate unconverted.
"""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.registry.fieldtracking import Writer
from genericapi.registry.meta import now_rfc3339
from genericapi.registry.store import Store
from genericapi.registry.strategy import Strategy
from genericapi.storage.etcd import EtcdClient

from .virtual import VirtualStore, created_status, ensure_namespace, mapping

_BINDING_CONFLICT = ("", "pods/binding")


def validate_binding(binding: dict[str, Any]) -> list[FieldError]:
    """kube's ``ValidatePodBinding``: the target is a Node (or unkinded) and is named."""
    target = mapping(binding.get("target"))
    errs: list[FieldError] = []
    kind = target.get("kind") or ""
    if kind and kind != "Node":
        errs.append(apierrors.not_supported("target.kind", kind, ["Node", "<empty>"]))
    if not target.get("name"):
        errs.append(apierrors.required("target.name"))
    return errs


def _aggregate(errs: list[FieldError]) -> str:
    """``ErrorList.ToAggregate().Error()``: one message alone, several in brackets."""
    messages = list(dict.fromkeys(str(e) for e in errs))
    return messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"


def _pod_scheduled(pod: dict[str, Any]) -> None:
    """``UpdatePodCondition`` with PodScheduled=True: the transition time moves only when the
    status changes; the probe time is left as is."""
    status = pod.setdefault("status", {})
    conditions = status.setdefault("conditions", [])
    for cond in conditions:
        if isinstance(cond, dict) and cond.get("type") == "PodScheduled":
            if cond.get("status") != "True":
                cond["lastTransitionTime"] = now_rfc3339()
            cond["status"] = "True"
            for key in ("reason", "message"):
                cond.pop(key, None)
            return
    conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                       "lastTransitionTime": now_rfc3339()})


def _precondition_failed(key: str, name: str, detail: str) -> apierrors.APIError:
    """A failed storage precondition as kube's InterpretUpdateError words it: a Conflict on pods
    carrying the storage layer's InvalidObj error text."""
    why = (f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, "
           f"AdditionalErrorMsg: Precondition failed: {detail}")
    return apierrors.conflict("", "pods", name, why)


async def bind(pods: Store, namespace: str, name: str, binding: dict[str, Any], dry_run: bool) -> dict[str, Any]:
    """``BindingREST.Create`` for the Pod ``name``: the answer is a Success Status (201)."""
    meta = mapping(binding.get("metadata"))
    if meta.get("name", "") != name:
        raise apierrors.bad_request("name in URL does not match name in Binding object")
    errs = validate_binding(binding)
    if errs:
        raise apierrors.unknown_error(_aggregate(errs))
    if not name:
        raise apierrors.bad_request("Name parameter required.")
    uid, rv = str(meta.get("uid") or ""), str(meta.get("resourceVersion") or "")
    node = str(binding["target"]["name"])
    annotations = mapping(meta.get("annotations"))

    key = pods.key(namespace, name).decode()

    def assign(pod: dict[str, Any]) -> dict[str, Any]:
        pod_meta = pod["metadata"]
        if uid and uid != pod_meta.get("uid"):
            raise _precondition_failed(key, name, f"UID in precondition: {uid}, "
                                                  f"UID in object meta: {pod_meta.get('uid', '')}")
        if rv and rv != pod_meta.get("resourceVersion"):
            current = pod_meta.get("resourceVersion", "")
            raise _precondition_failed(key, name, f"ResourceVersion in precondition: {rv}, "
                                                  f"ResourceVersion in object meta: {current}")
        spec = pod.setdefault("spec", {})
        if pod_meta.get("deletionTimestamp"):
            raise apierrors.conflict(*_BINDING_CONFLICT, name,
                                     f"pod {name} is being deleted, cannot be assigned to a host")
        if spec.get("nodeName"):
            raise apierrors.conflict(*_BINDING_CONFLICT, name,
                                     f'pod {name} is already assigned to node "{spec["nodeName"]}"')
        if spec.get("schedulingGates"):
            raise apierrors.conflict(*_BINDING_CONFLICT, name, f"pod {name} has non-empty .spec.schedulingGates")
        spec["nodeName"] = node
        if annotations:
            pod_meta["annotations"] = {**(pod_meta.get("annotations") or {}), **annotations}
        _pod_scheduled(pod)
        return pod

    await pods.storage_update(namespace, name, assign, dry_run=dry_run)
    return created_status()


def install_pod_binding(pods: Store) -> None:
    """POST ``pods/<name>/binding``."""

    async def create(namespace: str, name: str, obj: dict[str, Any], dry_run: bool) -> tuple[int, dict[str, Any]]:
        ensure_namespace(obj, namespace)
        return 201, await bind(pods, namespace, name, obj, dry_run)

    pods.subresource_creators["binding"] = create


class BindingStore(VirtualStore):
    """POST ``bindings`` (kube's LegacyBindingREST): the Pod is the one the Binding names."""

    def __init__(self, info: ResourceInfo, strategy: Strategy, client: EtcdClient, key_prefix: str,
                 pods: Store) -> None:
        super().__init__(info, strategy, client, key_prefix)
        self.pods = pods

    async def create(self, namespace: str, obj: dict[str, Any], dry_run: bool = False,
                     writer: Writer | None = None) -> dict[str, Any]:
        ensure_namespace(obj, namespace)
        meta = mapping(obj.get("metadata"))
        return await bind(self.pods, namespace, str(meta.get("name") or ""), obj, dry_run)
