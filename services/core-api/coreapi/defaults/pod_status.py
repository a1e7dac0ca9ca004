"""The status a new Pod starts with (kube's Pod strategy ``PrepareForCreate``): phase Pending,
the QoS class computed from the (defaulted) container resources, and the PodScheduled=False
condition when scheduling gates hold the Pod back."""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery.quantity import Quantity

from .fields import JSON, items_at, obj_at
from .quantities import parse

_QOS_RESOURCES = ("cpu", "memory")
_GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


def qos_class(pod: JSON) -> str:
    """``qos.ComputePodQOS`` over containers and init containers (pod-level resources are off in 1.33)."""
    spec = obj_at(pod, "spec")
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}
    guaranteed = True
    for key in ("containers", "initContainers"):
        for container in items_at(spec, key):
            resources = obj_at(container, "resources")
            _add_positive(requests, obj_at(resources, "requests"))
            found = _add_positive(limits, obj_at(resources, "limits"))
            if not set(_QOS_RESOURCES) <= found:
                guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed:
        for name, request in requests.items():
            limit = limits.get(name)
            if limit is None or limit.cmp(request) != 0:
                guaranteed = False
                break
    if guaranteed and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


def _add_positive(totals: dict[str, Quantity], values: dict[str, Any] | None) -> set[str]:
    """Add each positive cpu/memory quantity into ``totals``; the names that were added."""
    found: set[str] = set()
    for name, value in (values or {}).items():
        if name not in _QOS_RESOURCES:
            continue
        q = parse(value)
        if q is None or q.sign() <= 0:
            continue
        found.add(name)
        totals[name] = q if name not in totals else q.add(totals[name])
    return found


def initial_status(pod: JSON, now: str) -> JSON:
    """The whole status of a Pod being created (``now`` stamps the gated condition)."""
    status: JSON = {"phase": "Pending", "qosClass": qos_class(pod)}
    spec = obj_at(pod, "spec")
    gates = spec.get("schedulingGates") if spec is not None else None
    if isinstance(gates, list) and gates:
        status["conditions"] = [{
            "type": "PodScheduled", "status": "False", "reason": "SchedulingGated", "message": _GATED_MESSAGE,
            "lastProbeTime": None, "lastTransitionTime": now,
        }]
    return status
