"""Services (``ValidateService`` / ``ValidateServiceUpdate``): ports, types, ExternalName,
session affinity, clusterIP(s) and IP families, and the addresses that may not change once set.

Allocation of addresses belongs to the Service strategy; this module only checks the values it is
given, as kube-apiserver's validation does after allocation.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from genericapi.apimachinery import errors
from genericapi.apimachinery.errors import FieldError, GoRendered
from genericapi.apimachinery.gofmt import go_quote, string_slice
from genericapi.apimachinery.validation_meta import (
    validate_dns1123_label,
    validate_dns1123_subdomain,
    validate_labels,
    validate_qualified_name,
)

from . import names

_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
_AFFINITIES = ("ClientIP", "None")
_PROTOCOLS = ("SCTP", "TCP", "UDP")
_FAMILIES = ("IPv4", "IPv6")
_FAMILY_POLICIES = ("PreferDualStack", "RequireDualStack", "SingleStack")
_KUBELET_PORT = 10250
_BAD_IP = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _strs(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _ips(value: list[str]) -> GoRendered:
    return string_slice(value)


def _families(value: list[str]) -> GoRendered:
    return GoRendered("[]core.IPFamily{" + ", ".join(go_quote(v) for v in value) + "}")


def _headless(spec: Mapping[str, Any]) -> bool:
    return _strs(spec.get("clusterIPs")) == ["None"]


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _service_port_key(port: Mapping[str, Any]) -> GoRendered:
    """``core.ServicePort{Protocol, Port}`` as the duplicate-port error prints it."""
    return GoRendered(f'core.ServicePort{{Name:"", Protocol:{go_quote(str(port.get("protocol") or ""))}, '
                      f'AppProtocol:(*string)(nil), Port:{port.get("port") or 0}, '
                      f'TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:""}}, NodePort:0}}')


def _validate_port(port: Mapping[str, Any], require_name: bool, seen: set[str], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    name = str(port.get("name") or "")
    if require_name and not name:
        errs.append(errors.required(f"{path}.name"))
    elif name:
        errs.extend(errors.invalid(f"{path}.name", name, m) for m in validate_dns1123_label(name))
        if name in seen:
            errs.append(errors.duplicate(f"{path}.name", name))
        else:
            seen.add(name)
    number = port.get("port")
    if isinstance(number, int):
        errs.extend(errors.invalid(f"{path}.port", number, m) for m in names.port_num_errors(number))
    protocol = port.get("protocol")
    if protocol == "":
        errs.append(errors.required(f"{path}.protocol"))
    elif protocol is not None and protocol not in _PROTOCOLS:
        errs.append(errors.not_supported(f"{path}.protocol", protocol, _PROTOCOLS))
    target = port.get("targetPort")
    if isinstance(target, int) and not isinstance(target, bool):
        errs.extend(errors.invalid(f"{path}.targetPort", target, m) for m in names.port_num_errors(target))
    elif isinstance(target, str):
        errs.extend(errors.invalid(f"{path}.targetPort", target, m) for m in names.port_name_errors(target))
    app = port.get("appProtocol")
    if isinstance(app, str):
        errs.extend(errors.invalid(f"{path}.appProtocol", app, m) for m in validate_qualified_name(app))
    return errs


def _cluster_ip_fields(spec: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateServiceClusterIPsRelatedFields``."""
    if spec.get("type") == "ExternalName":
        return []
    errs: list[FieldError] = []
    cluster_ip = str(spec.get("clusterIP") or "")
    ips = _strs(spec.get("clusterIPs"))
    if cluster_ip:
        if not ips:
            errs.append(errors.required("spec.clusterIPs"))
        elif ips[0] != cluster_ip:
            errs.append(errors.invalid("spec.clusterIPs", _ips(ips), "first value must match `clusterIP`"))
    elif ips:
        errs.append(errors.invalid("spec.clusterIPs", _ips(ips), "must be empty when `clusterIP` is not specified"))
    families = _strs(spec.get("ipFamilies"))
    seen: set[str] = set()
    for i, family in enumerate(families):
        if family not in _FAMILIES:
            errs.append(errors.not_supported(f"spec.ipFamilies[{i}]", family, _FAMILIES))
        if family in seen:
            errs.append(errors.duplicate(f"spec.ipFamilies[{i}]", family))
        seen.add(family)
    policy = spec.get("ipFamilyPolicy")
    if policy is not None and policy not in _FAMILY_POLICIES:
        errs.append(errors.not_supported("spec.ipFamilyPolicy", policy, _FAMILY_POLICIES))
    bad_ips = False
    for i, ip in enumerate(ips):
        if i == 0 and ip == "None":
            if len(ips) > 1:
                bad_ips = True
                errs.append(errors.invalid("spec.clusterIPs", _ips(ips), "'None' must be the first and only value"))
            continue
        if not _is_ip(ip):
            bad_ips = True
            errs.append(errors.invalid(f"spec.clusterIPs[{i}]", ip, _BAD_IP))
    if len(ips) > 2:
        errs.append(errors.invalid("spec.clusterIPs", _ips(ips), "may only hold up to 2 values"))
    if bad_ips:
        return errs
    if len(ips) > 1:
        versions = {ipaddress.ip_address(ip).version for ip in ips}
        if len(versions) != len(ips):
            errs.append(errors.invalid("spec.clusterIPs", _ips(ips),
                                       "may specify no more than one IP for each IP family"))
    if not _headless(spec) and ips and families:
        for i, ip in enumerate(ips[:len(families)]):
            v6 = ipaddress.ip_address(ip).version == 6
            if families[i] == "IPv4" and v6:
                errs.append(errors.invalid(f"spec.clusterIPs[{i}]", ip,
                                           f"expected an IPv4 value as indicated by `ipFamilies[{i}]`"))
            if families[i] == "IPv6" and not v6:
                errs.append(errors.invalid(f"spec.clusterIPs[{i}]", ip,
                                           f"expected an IPv6 value as indicated by `ipFamilies[{i}]`"))
    return errs


def validate_service(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs: list[FieldError] = []
    ports = [_dict(p) for p in spec.get("ports") or []]
    kind = spec.get("type")
    headless = _headless(spec)
    if not ports and not headless and kind != "ExternalName":
        errs.append(errors.required("spec.ports"))
    ips = _strs(spec.get("clusterIPs"))
    if kind == "LoadBalancer":
        if headless:
            errs.append(errors.invalid("spec.clusterIPs[0]", ips[0],
                                       "may not be set to 'None' for LoadBalancer services"))
        for i, port in enumerate(ports):
            if port.get("port") == _KUBELET_PORT:
                errs.append(errors.invalid(
                    f"spec.ports[{i}]", _KUBELET_PORT,
                    f"may not expose port {_KUBELET_PORT} externally since it is used by kubelet"))
    elif kind == "NodePort":
        if headless:
            errs.append(errors.invalid("spec.clusterIPs[0]", ips[0], "may not be set to 'None' for NodePort services"))
    elif kind == "ExternalName":
        if ips:
            errs.append(errors.forbidden("spec.clusterIPs", "may not be set for ExternalName services"))
        if spec.get("ipFamilies"):
            errs.append(errors.forbidden("spec.ipFamilies", "may not be set for ExternalName services"))
        if spec.get("ipFamilyPolicy") is not None:
            errs.append(errors.forbidden("spec.ipFamilyPolicy", "may not be set for ExternalName services"))
        cname = str(spec.get("externalName") or "").removesuffix(".")
        if cname:
            errs.extend(errors.invalid("spec.externalName", cname, m) for m in validate_dns1123_subdomain(cname))
        else:
            errs.append(errors.required("spec.externalName"))
    seen: set[str] = set()
    for i, port in enumerate(ports):
        errs.extend(_validate_port(port, len(ports) > 1, seen, f"spec.ports[{i}]"))
    selector = spec.get("selector")
    if isinstance(selector, Mapping):
        errs.extend(validate_labels(selector, "spec.selector"))
    affinity = spec.get("sessionAffinity")
    if affinity == "":
        errs.append(errors.required("spec.sessionAffinity"))
    elif affinity is not None and affinity not in _AFFINITIES:
        errs.append(errors.not_supported("spec.sessionAffinity", affinity, _AFFINITIES))
    if affinity == "None" and spec.get("sessionAffinityConfig") is not None:
        errs.append(errors.forbidden("spec.sessionAffinityConfig", "must not be set when session affinity is None"))
    errs.extend(_cluster_ip_fields(spec))
    for i, ip in enumerate(_strs(spec.get("externalIPs"))):
        if not _is_ip(ip):
            errs.append(errors.invalid(f"spec.externalIPs[{i}]", ip, _BAD_IP))
    if kind == "":
        errs.append(errors.required("spec.type"))
    elif kind is not None and kind not in _TYPES:
        errs.append(errors.not_supported("spec.type", kind, _TYPES))
    if kind in ("ClusterIP", None):
        for i, port in enumerate(ports):
            if port.get("nodePort"):
                errs.append(errors.forbidden(f"spec.ports[{i}].nodePort", "may not be used when `type` is 'ClusterIP'"))
    node_ports: set[tuple[str, int]] = set()
    for i, port in enumerate(ports):
        node_port = port.get("nodePort")
        if not node_port:
            continue
        key = (str(port.get("protocol") or "TCP"), node_port)
        if key in node_ports:
            errs.append(errors.duplicate(f"spec.ports[{i}].nodePort", node_port))
        node_ports.add(key)
    pairs: set[tuple[str, Any]] = set()
    for i, port in enumerate(ports):
        pair = (str(port.get("protocol") or ""), port.get("port"))
        if pair in pairs:
            errs.append(errors.duplicate(f"spec.ports[{i}]", _service_port_key(port)))
        pairs.add(pair)
    return errs


def validate_service_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    spec, old_spec = _dict(new.get("spec")), _dict(old.get("spec"))
    errs: list[FieldError] = []
    if "ExternalName" not in (spec.get("type"), old_spec.get("type")):
        errs.extend(_cluster_ips_update(spec, old_spec))
        errs.extend(_families_update(spec, old_spec))
    old_class, new_class = old_spec.get("loadBalancerClass"), spec.get("loadBalancerClass")
    if old_spec.get("type") == "LoadBalancer" and spec.get("type") == "LoadBalancer" and old_class != new_class:
        errs.append(errors.invalid("spec.loadBalancerClass", new_class, "may not change once set"))
    return errs + validate_service(new)


def _cluster_ips_update(spec: Mapping[str, Any], old_spec: Mapping[str, Any]) -> list[FieldError]:
    new_ips, old_ips = _strs(spec.get("clusterIPs")), _strs(old_spec.get("clusterIPs"))
    if _headless(spec) and _headless(old_spec):
        return []
    errs: list[FieldError] = []
    path = "spec.clusterIPs"
    if len(old_ips) == len(new_ips):
        errs.extend(errors.invalid(f"{path}[{i}]", _ips(new_ips), "may not change once set")
                    for i, ip in enumerate(old_ips) if ip != new_ips[i])
    elif len(old_ips) > len(new_ips):
        if not new_ips:
            errs.append(errors.invalid(f"{path}[0]", _ips(new_ips), "primary clusterIP can not be unset"))
        elif new_ips[0] != old_ips[0]:
            errs.append(errors.invalid(f"{path}[0]", _ips(new_ips), "may not change once set"))
        if len(new_ips) == 1 and spec.get("ipFamilyPolicy") != "SingleStack":
            errs.append(errors.invalid("spec.ipFamilyPolicy", spec.get("ipFamilyPolicy"),
                                       "must be set to 'SingleStack' when releasing the secondary clusterIP"))
    elif old_ips and new_ips[0] != old_ips[0]:
        errs.append(errors.invalid(f"{path}[0]", _ips(new_ips), "may not change once set"))
    return errs


def _families_update(spec: Mapping[str, Any], old_spec: Mapping[str, Any]) -> list[FieldError]:
    if _headless(spec) != _headless(old_spec) or _headless(spec):
        return []
    new_f, old_f = _strs(spec.get("ipFamilies")), _strs(old_spec.get("ipFamilies"))
    errs: list[FieldError] = []
    path = "spec.ipFamilies[0]"
    if len(old_f) == len(new_f):
        errs.extend(errors.invalid(path, _families(new_f), "may not change once set")
                    for i, family in enumerate(old_f) if family != new_f[i])
    elif len(old_f) > len(new_f):
        if not _strs(spec.get("clusterIPs")):
            errs.append(errors.invalid(path, _families(new_f), "primary ipFamily can not be unset"))
        if new_f and new_f[0] != old_f[0]:
            errs.append(errors.invalid(path, _ips(_strs(spec.get("clusterIPs"))), "may not change once set"))
        if len(new_f) == 1 and spec.get("ipFamilyPolicy") != "SingleStack":
            errs.append(errors.invalid("spec.ipFamilyPolicy", spec.get("ipFamilyPolicy"),
                                       "must be set to 'SingleStack' when releasing the secondary ipFamily"))
    elif old_f and new_f and new_f[0] != old_f[0]:
        errs.append(errors.invalid(path, _ips(_strs(spec.get("clusterIPs"))), "may not change once set"))
    return errs
