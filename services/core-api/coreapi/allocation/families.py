"""ipFamilyPolicy and ipFamilies of a Service, set before its ClusterIPs are allocated.

kube-apiserver fills these in the allocator rather than in defaulting because they depend on the
cluster's configured families (``initIPFamilyFields`` in ``alloc.go``). kubechain serves one
family (that of ``--service-cluster-ip-range``); requests for the other get kube's errors.
"""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.errors import FieldError

from .ranges import parse_ip
from .servicefields import CLUSTER_IP_NONE, cluster_ips, go_string_slice, needs_cluster_ip, same_cluster_ips, spec

SINGLE, PREFER_DUAL, REQUIRE_DUAL = "SingleStack", "PreferDualStack", "RequireDualStack"
_OTHER = {"IPv4": "IPv6", "IPv6": "IPv4"}
_IP_HELP = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"


def _invalid(svc: dict[str, Any], errs: list[FieldError]) -> apierrors.APIError:
    return apierrors.invalid_object("", "Service", (svc.get("metadata") or {}).get("name", ""), errs)


def _family(ip: str) -> str:
    addr = parse_ip(ip)
    if addr is None:
        return "unknown"
    return "IPv4" if addr.version == 4 else "IPv6"


def _malformed_ips(svc: dict[str, Any]) -> list[FieldError]:
    """The loose pre-validation kube runs first, so that allocation never sees a bad address."""
    errs: list[FieldError] = []
    ips = cluster_ips(svc)
    for i, ip in enumerate(ips):
        if i == 0 and ip == CLUSTER_IP_NONE:
            if len(ips) > 1:
                errs.append(apierrors.invalid("spec.clusterIPs", go_string_slice(ips),
                                              "'None' must be the first and only value"))
            continue
        if parse_ip(ip) is None:
            errs.append(apierrors.invalid(f"spec.clusterIPs[{i}]", ip, _IP_HELP))
    return errs


def init_ip_families(svc: dict[str, Any], old: dict[str, Any] | None, family: str) -> None:
    """Default ipFamilyPolicy/ipFamilies for a cluster serving ``family``; raise 422 on conflicts."""
    if not needs_cluster_ip(svc):
        return
    s = spec(svc)
    headless_selectorless = s.get("clusterIP") == CLUSTER_IP_NONE and not s.get("selector")
    policy = s.get("ipFamilyPolicy")
    if not policy:
        old_policy = spec(old).get("ipFamilyPolicy") if old is not None else None
        policy = old_policy or (REQUIRE_DUAL if headless_selectorless else SINGLE)
        s["ipFamilyPolicy"] = policy
    bad = _malformed_ips(svc)
    if bad:
        raise _invalid(svc, bad)
    errs: list[FieldError] = []
    families = [str(f) for f in s.get("ipFamilies") or []]
    if old is not None:
        old_families = [str(f) for f in spec(old).get("ipFamilies") or []]
        if policy == SINGLE:
            if same_cluster_ips(old, svc) and len(cluster_ips(svc)) > 1:
                s["clusterIPs"] = cluster_ips(svc)[:1]
            if families == old_families and len(families) > 1:
                families = families[:1]
        else:
            if cluster_ips(svc) and len(cluster_ips(svc)) < len(cluster_ips(old)):
                errs.append(apierrors.invalid("spec.ipFamilyPolicy", policy,
                                              "must be 'SingleStack' to release the secondary cluster IP"))
            if families and len(families) < len(old_families):
                errs.append(apierrors.invalid("spec.ipFamilyPolicy", policy,
                                              "must be 'SingleStack' to release the secondary IP family"))
    ips = cluster_ips(svc)
    if policy == SINGLE:
        if len(ips) == 2:
            errs.append(apierrors.invalid("spec.ipFamilyPolicy", policy, "must be 'RequireDualStack' or "
                                          "'PreferDualStack' when multiple cluster IPs are specified"))
        if len(families) == 2:
            errs.append(apierrors.invalid("spec.ipFamilyPolicy", policy, "must be 'RequireDualStack' or "
                                          "'PreferDualStack' when multiple IP families are specified"))
    for i, ip in enumerate(ips):
        if ip == CLUSTER_IP_NONE:
            break
        fam = _family(ip)
        if i >= len(families):
            if fam != family:
                errs.append(apierrors.invalid(f"spec.clusterIPs[{i}]", go_string_slice(ips),
                                              f"{fam} is not configured on this cluster"))
            else:
                families.append(fam)
    if errs:
        raise _invalid(svc, errs)
    if headless_selectorless:
        # Headless without selector may name both families even on a single-stack cluster.
        if not families:
            families = [family]
        if len(families) < 2 and policy != SINGLE:
            families.append(_OTHER.get(families[0], "IPv6"))
        s["ipFamilies"] = families
        return
    if policy == REQUIRE_DUAL:
        errs.append(apierrors.invalid("spec.ipFamilyPolicy", policy,
                                      "this cluster is not configured for dual-stack services"))
    for i, fam in enumerate(families):
        if fam != family:
            errs.append(apierrors.invalid(f"spec.ipFamilies[{i}]", fam, "not configured on this cluster"))
    if errs:
        raise _invalid(svc, errs)
    s["ipFamilies"] = families or [family]
