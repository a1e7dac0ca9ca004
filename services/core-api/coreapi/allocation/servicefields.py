"""How a Service's allocated fields relate: which types need a ClusterIP or NodePorts, and how an
update that leaves them out keeps what was allocated.

These are the pure rules of kube-apiserver's Service registry (``storage.go`` and
``strategy.go`` in ``pkg/registry/core/service``); Services are plain dicts here.
"""

from __future__ import annotations

import copy
from typing import Any

from genericapi.apimachinery.errors import GoRendered

CLUSTER_IP_NONE = "None"


def spec(svc: dict[str, Any]) -> dict[str, Any]:
    out = svc.get("spec")
    if not isinstance(out, dict):
        out = svc["spec"] = {}
    return out


def service_type(svc: dict[str, Any]) -> str:
    return str(spec(svc).get("type") or "ClusterIP")


def ports_of(svc: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in spec(svc).get("ports") or [] if isinstance(p, dict)]


def cluster_ips(svc: dict[str, Any]) -> list[str]:
    return [str(ip) for ip in spec(svc).get("clusterIPs") or []]


def needs_cluster_ip(svc: dict[str, Any]) -> bool:
    return service_type(svc) != "ExternalName"


def is_headless(svc: dict[str, Any]) -> bool:
    ips = cluster_ips(svc)
    return bool(ips) and ips[0] == CLUSTER_IP_NONE


def needs_node_port(svc: dict[str, Any]) -> bool:
    return service_type(svc) in ("NodePort", "LoadBalancer")


def needs_health_check(svc: dict[str, Any]) -> bool:
    """A LoadBalancer with externalTrafficPolicy Local gets a healthCheckNodePort."""
    return service_type(svc) == "LoadBalancer" and spec(svc).get("externalTrafficPolicy") == "Local"


def externally_accessible(svc: dict[str, Any]) -> bool:
    kind = service_type(svc)
    return kind in ("NodePort", "LoadBalancer") or (kind == "ClusterIP" and bool(spec(svc).get("externalIPs")))


def should_allocate_node_ports(svc: dict[str, Any]) -> bool:
    kind = service_type(svc)
    if kind == "NodePort":
        return True
    if kind == "LoadBalancer":
        return spec(svc).get("allocateLoadBalancerNodePorts") is not False  # defaulted to true
    return False


def node_ports(svc: dict[str, Any]) -> list[int]:
    """Every non-zero nodePort of the Service's ports (kube's collectServiceNodePorts)."""
    return [int(p["nodePort"]) for p in ports_of(svc) if isinstance(p.get("nodePort"), int) and p["nodePort"]]


def health_check_port(svc: dict[str, Any]) -> int:
    value = spec(svc).get("healthCheckNodePort")
    return value if isinstance(value, int) else 0


def same_cluster_ips(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return cluster_ips(a) == cluster_ips(b)


def go_string_slice(values: list[str]) -> GoRendered:
    """A []string as Go's %#v prints it in a field error."""
    quoted = ", ".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
    return GoRendered("[]string{" + quoted + "}")


def normalize_cluster_ips(new: dict[str, Any], old: dict[str, Any] | None) -> None:
    """Keep clusterIP and clusterIPs in step for clients that only know the singular field."""
    new_spec = spec(new)
    ip = str(new_spec.get("clusterIP") or "")
    if old is None:
        if ip and not new_spec.get("clusterIPs"):
            new_spec["clusterIPs"] = [ip]
        return
    old_spec = spec(old)
    old_ip = str(old_spec.get("clusterIP") or "")
    if cluster_ips(old) and not new_spec.get("clusterIPs") and old_ip == ip:
        new_spec["clusterIPs"] = copy.deepcopy(old_spec["clusterIPs"])  # an old client's patch
    if old_ip != ip:
        if old_ip and not ip:
            if same_cluster_ips(old, new):
                new_spec.pop("clusterIPs", None)
        elif same_cluster_ips(old, new):
            new_spec["clusterIPs"] = [ip]


def patch_allocated_values(new: dict[str, Any], old: dict[str, Any]) -> None:
    """An update that leaves out allocated values keeps them (so re-applying a manifest works)."""
    new_spec, old_spec = spec(new), spec(old)
    if needs_cluster_ip(old) and needs_cluster_ip(new):
        if not new_spec.get("clusterIP") and old_spec.get("clusterIP"):
            new_spec["clusterIP"] = old_spec["clusterIP"]
        if not new_spec.get("clusterIPs") and old_spec.get("clusterIPs"):
            new_spec["clusterIPs"] = copy.deepcopy(old_spec["clusterIPs"])
    if needs_node_port(old) and needs_node_port(new):
        used = set(node_ports(old)) & set(node_ports(new))
        by_name = {str(p.get("name") or ""): p.get("nodePort") or 0 for p in ports_of(old)}
        for port in ports_of(new):
            if not port.get("nodePort"):
                previous = by_name.get(str(port.get("name") or ""), 0)
                if previous and previous not in used:
                    port["nodePort"] = previous
    if needs_health_check(old) and needs_health_check(new):
        if not health_check_port(new) and health_check_port(old):
            new_spec["healthCheckNodePort"] = health_check_port(old)


def drop_type_dependent_fields(new: dict[str, Any], old: dict[str, Any]) -> None:
    """A type change wipes the allocated fields the new type has no use for, unless the user
    also changed them (then validation decides); they are released after the write."""
    new_spec, old_spec = spec(new), spec(old)
    if needs_cluster_ip(old) and not needs_cluster_ip(new):
        if same_cluster_ips(old, new) and new_spec.get("clusterIP") == old_spec.get("clusterIP"):
            new_spec.pop("clusterIP", None)
            new_spec.pop("clusterIPs", None)
        if new_spec.get("ipFamilies") == old_spec.get("ipFamilies"):
            new_spec.pop("ipFamilies", None)
        if new_spec.get("ipFamilyPolicy") == old_spec.get("ipFamilyPolicy"):
            new_spec.pop("ipFamilyPolicy", None)
    if needs_node_port(old) and not needs_node_port(new) and set(node_ports(new)) <= set(node_ports(old)):
        for port in ports_of(new):
            port.pop("nodePort", None)
    if needs_health_check(old) and not needs_health_check(new) and health_check_port(new) == health_check_port(old):
        new_spec.pop("healthCheckNodePort", None)
    if service_type(old) == "LoadBalancer" and service_type(new) != "LoadBalancer":
        alloc_new = new_spec.get("allocateLoadBalancerNodePorts")
        alloc_old = old_spec.get("allocateLoadBalancerNodePorts")
        if alloc_new is not None and alloc_old is not None and alloc_new == alloc_old:
            new_spec.pop("allocateLoadBalancerNodePorts", None)
        if new_spec.get("loadBalancerClass") == old_spec.get("loadBalancerClass"):
            new_spec.pop("loadBalancerClass", None)
    if externally_accessible(old) and not externally_accessible(new):
        if new_spec.get("externalTrafficPolicy") == old_spec.get("externalTrafficPolicy"):
            new_spec.pop("externalTrafficPolicy", None)
    if service_type(new) != "LoadBalancer":
        status = new.get("status")
        if isinstance(status, dict):
            status["loadBalancer"] = {}
