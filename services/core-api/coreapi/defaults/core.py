"""Defaults of the remaining core/v1 kinds: Namespace, Secret, PersistentVolume(Claim),
LimitRange, ResourceQuota and Node (``pkg/apis/core/v1`` defaulters)."""

from __future__ import annotations

from .fields import JSON, default_ptr, default_str, ensure_obj, items_at, obj_at
from .quantities import default_resource_list
from .volumes import default_claim, default_persistent_volume_source


def namespace(obj: JSON) -> None:
    """The well-known name label (kept in sync by the strategy too) and phase Active."""
    meta = obj_at(obj, "metadata")
    name = meta.get("name") if meta is not None else None
    if meta is not None and isinstance(name, str) and name:
        labels = meta.get("labels")
        if labels is None:
            labels = meta["labels"] = {}
        if isinstance(labels, dict):
            labels["kubernetes.io/metadata.name"] = name
    status = ensure_obj(obj, "status")
    if status is not None:
        default_str(status, "phase", "Active")


def secret(obj: JSON) -> None:
    default_str(obj, "type", "Opaque")


def persistent_volume(obj: JSON) -> None:
    spec = obj_at(obj, "spec")
    if spec is not None:
        default_str(spec, "persistentVolumeReclaimPolicy", "Retain")
        default_ptr(spec, "volumeMode", "Filesystem")
        default_resource_list(spec, "capacity")
        default_persistent_volume_source(spec)
    status = ensure_obj(obj, "status")
    if status is not None:
        default_str(status, "phase", "Pending")


def persistent_volume_claim(obj: JSON) -> None:
    default_claim(obj)


def limit_range(obj: JSON) -> None:
    for item in items_at(obj_at(obj, "spec"), "limits"):
        if item.get("type") == "Container":
            _container_limit_defaults(item)
        for key in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
            default_resource_list(item, key)


def _container_limit_defaults(item: JSON) -> None:
    """Default limit <- max; default request <- default limit, else min. Go fills maps that
    ``omitempty`` hides while empty, so an empty result is not written."""
    lists = {key: item.get(key) for key in ("max", "min", "default", "defaultRequest")}
    if any(value is not None and not isinstance(value, dict) for value in lists.values()):
        return
    default: dict[str, object] = dict(lists["default"] or {})
    request: dict[str, object] = dict(lists["defaultRequest"] or {})
    for name, value in (lists["max"] or {}).items():
        default.setdefault(name, value)
    for name, value in default.items():
        request.setdefault(name, value)
    for name, value in (lists["min"] or {}).items():
        request.setdefault(name, value)
    if default:
        item["default"] = default
    if request:
        item["defaultRequest"] = request


def resource_quota(obj: JSON) -> None:
    default_resource_list(obj_at(obj, "spec"), "hard")
    status = obj_at(obj, "status")
    default_resource_list(status, "hard")
    default_resource_list(status, "used")


#: NodeSystemInfo's string fields: none is ``omitempty``, so Go writes them all, empty or not
_NODE_INFO_FIELDS = ("architecture", "bootID", "containerRuntimeVersion", "kernelVersion", "kubeProxyVersion",
                     "kubeletVersion", "machineID", "operatingSystem", "osImage", "systemUUID")


def node(obj: JSON) -> None:
    """Allocatable defaults to capacity; the status structs Go always writes are filled in."""
    status = ensure_obj(obj, "status")
    if status is None:
        return
    endpoints = ensure_obj(status, "daemonEndpoints")
    endpoint = ensure_obj(endpoints, "kubeletEndpoint") if endpoints is not None else None
    if endpoint is not None:
        default_ptr(endpoint, "Port", 0)
    info = ensure_obj(status, "nodeInfo")
    if info is not None:
        for key in _NODE_INFO_FIELDS:
            default_ptr(info, key, "")
    capacity = status.get("capacity")
    if status.get("allocatable") is None and isinstance(capacity, dict):
        status["allocatable"] = dict(capacity)
    default_resource_list(status, "capacity")
    default_resource_list(status, "allocatable")
