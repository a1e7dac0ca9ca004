"""Defaults of Services, Endpoints and EndpointSlices (core/v1 and discovery/v1 defaulters).

Cluster IPs, IP families and node ports are allocation, not defaulting: the Service strategy
handles them (a separate module), these functions never touch them.
"""

from __future__ import annotations

from .fields import JSON, default_ptr, default_str, ensure_obj, is_int, items_at, obj_at

#: ``v1.DefaultClientIPServiceAffinitySeconds``: three hours
CLIENT_IP_AFFINITY_SECONDS = 10800
_INTERNAL_POLICY_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")


def service(obj: JSON) -> None:
    spec = obj_at(obj, "spec")
    if spec is not None:
        _service_spec(spec)
    status = ensure_obj(obj, "status")
    if status is not None:
        balancer = ensure_obj(status, "loadBalancer")  # a non-pointer struct: Go always writes it
        if spec is not None and spec.get("type") == "LoadBalancer":
            for ingress in items_at(balancer, "ingress"):
                if ingress.get("ip") and ingress.get("ipMode") is None:
                    ingress["ipMode"] = "VIP"


def _service_spec(spec: JSON) -> None:
    default_str(spec, "sessionAffinity", "None")
    affinity = spec.get("sessionAffinity")
    if affinity == "None":
        spec.pop("sessionAffinityConfig", None)
    elif affinity == "ClientIP":
        config = spec.get("sessionAffinityConfig")
        client_ip = obj_at(config, "clientIP")
        missing = client_ip is None or client_ip.get("timeoutSeconds") is None
        if config is None or (isinstance(config, dict) and missing):
            spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": CLIENT_IP_AFFINITY_SECONDS}}
    default_str(spec, "type", "ClusterIP")
    for port in items_at(spec, "ports"):
        default_str(port, "protocol", "TCP")
        target = port.get("targetPort")
        if target is None or target == "" or (is_int(target) and target == 0):
            number = port.get("port")
            if is_int(number):
                port["targetPort"] = number
    kind = spec.get("type")
    external_ips = spec.get("externalIPs")
    externally_accessible = kind in ("LoadBalancer", "NodePort") or (
        kind == "ClusterIP" and isinstance(external_ips, list) and len(external_ips) > 0)
    if externally_accessible:
        default_str(spec, "externalTrafficPolicy", "Cluster")
    if kind in _INTERNAL_POLICY_TYPES:
        default_ptr(spec, "internalTrafficPolicy", "Cluster")
    if kind == "LoadBalancer":
        default_ptr(spec, "allocateLoadBalancerNodePorts", True)


def endpoints(obj: JSON) -> None:
    for subset in items_at(obj, "subsets"):
        for port in items_at(subset, "ports"):
            default_str(port, "protocol", "TCP")


def endpoint_slice(obj: JSON) -> None:
    for port in items_at(obj, "ports"):
        default_ptr(port, "name", "")
        default_ptr(port, "protocol", "TCP")
