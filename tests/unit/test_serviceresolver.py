"""ServiceResolver: service references -> URLs, with kube's resolver errors and availability reasons."""

from __future__ import annotations

import random
from typing import Any

import pytest
from genericapi.apimachinery import serviceresolver as sr
from genericapi.apimachinery.serviceresolver import ServiceResolutionError, ServiceResolver, StaticLookup


def svc(name: str = "api", ns: str = "ns", type_: str | None = None, cluster_ip: str = "10.0.0.7",
        ports: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"clusterIP": cluster_ip, "ports": ports if ports is not None else
                         [{"name": "https", "port": 443, "targetPort": 8443}], **spec}
    if type_:
        s["type"] = type_
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": s}


def slice_(service: str, endpoints: list[tuple[str, bool | None]], ports: list[dict[str, Any]],
           ns: str = "ns", name: str = "", address_type: str = "IPv4") -> dict[str, Any]:
    eps = []
    for ip, ready in endpoints:
        ep: dict[str, Any] = {"addresses": [ip]}
        if ready is not None:
            ep["conditions"] = {"ready": ready}
        eps.append(ep)
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": address_type,
            "metadata": {"name": name or f"{service}-abc", "namespace": ns,
                         "labels": {sr.SERVICE_NAME_LABEL: service}},
            "endpoints": eps, "ports": ports}


def resolver(*objs: dict[str, Any], picker: sr.Picker | None = None) -> ServiceResolver:
    services = [o for o in objs if o["kind"] == "Service"]
    slices = [o for o in objs if o["kind"] == "EndpointSlice"]
    endpoints = [o for o in objs if o["kind"] == "Endpoints"]
    return ServiceResolver(StaticLookup(services, slices, endpoints), picker)


def test_external_name_goes_to_that_host_on_the_requested_port() -> None:
    r = resolver(svc("hook", type_="ExternalName", externalName="localhost", cluster_ip="", ports=[]))
    assert r.resolve("ns", "hook", 9443) == "https://localhost:9443"
    assert sr.resolve_cluster(svc("h", type_="ExternalName", externalName="::1"), 1) == "https://[::1]:1"


def test_ready_slice_endpoint_with_port_matched_by_name_uses_the_target_port() -> None:
    r = resolver(svc(), slice_("api", [("10.1.0.5", True)], [{"name": "https", "port": 8443}]))
    assert r.resolve("ns", "api", 443) == "https://10.1.0.5:8443"


def test_port_matched_by_number_when_the_endpoint_port_is_unnamed() -> None:
    service = svc(ports=[{"name": "https", "port": 443, "targetPort": 9000},
                         {"name": "metrics", "port": 80, "targetPort": 9100}])
    r = resolver(service, slice_("api", [("10.1.0.5", None)], [{"port": 9100}, {"port": 9000}]))
    assert r.resolve("ns", "api", 443) == "https://10.1.0.5:9000"
    assert r.resolve("ns", "api", 80) == "https://10.1.0.5:9100"


def test_named_target_port_matches_only_by_name() -> None:
    service = svc(ports=[{"name": "web", "port": 443, "targetPort": "https"}], cluster_ip="None")
    wrong = slice_("api", [("10.1.0.5", True)], [{"name": "other", "port": 8443}])
    with pytest.raises(ServiceResolutionError) as info:
        resolver(service, wrong).resolve("ns", "api", 443)
    assert info.value.reason == sr.MISSING_ENDPOINTS
    assert str(info.value) == 'no endpoints available for service "api"'
    right = slice_("api", [("10.1.0.5", True)], [{"name": "web", "port": 8443}])
    assert resolver(service, right).resolve("ns", "api", 443) == "https://10.1.0.5:8443"


def test_not_ready_endpoints_are_skipped() -> None:
    ports = [{"name": "https", "port": 8443}]
    objs = [svc(), slice_("api", [("10.1.0.1", False), ("10.1.0.2", True), ("10.1.0.3", False)], ports)]
    assert resolver(*objs).resolve_all("ns", "api", 443) == ["https://10.1.0.2:8443"]
    legacy = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "api", "namespace": "ns"},
              "subsets": [{"addresses": [{"ip": "10.2.0.1"}], "notReadyAddresses": [{"ip": "10.2.0.9"}],
                           "ports": [{"name": "https", "port": 8443}]}]}
    assert resolver(svc(), legacy).resolve_all("ns", "api", 443) == ["https://10.2.0.1:8443"]


def test_slices_of_other_services_and_namespaces_are_ignored() -> None:
    ports = [{"name": "https", "port": 8443}]
    objs = [svc(cluster_ip="None"), slice_("other", [("10.9.0.1", True)], ports),
            slice_("api", [("10.9.0.2", True)], ports, ns="elsewhere")]
    with pytest.raises(ServiceResolutionError, match='no endpoints available for service "api"'):
        resolver(*objs).resolve("ns", "api", 443)


def test_no_ready_endpoints_falls_back_to_the_cluster_ip() -> None:
    objs = [svc(), slice_("api", [("10.1.0.1", False)], [{"name": "https", "port": 8443}])]
    assert resolver(*objs).resolve("ns", "api", 443) == "https://10.0.0.7:443"
    assert resolver(svc()).resolve("ns", "api", 443) == "https://10.0.0.7:443"


def test_headless_service_without_endpoints_is_an_error() -> None:
    with pytest.raises(ServiceResolutionError) as info:
        resolver(svc(cluster_ip="None")).resolve("ns", "api", 443)
    assert info.value.reason == sr.MISSING_ENDPOINTS
    assert info.value.api_error().code == 503
    with pytest.raises(ServiceResolutionError, match='cannot route to service with ClusterIP "None"'):
        sr.resolve_cluster(svc(cluster_ip="None"), 443)


def test_missing_service_is_kubes_not_found() -> None:
    with pytest.raises(ServiceResolutionError) as info:
        resolver().resolve("ns", "ghost", 443)
    assert info.value.reason == sr.SERVICE_NOT_FOUND
    assert str(info.value) == 'service "ghost" not found'
    err = info.value.api_error()
    assert (err.code, err.reason, err.message) == (404, "NotFound", 'service "ghost" not found')
    assert err.details == {"name": "ghost", "kind": "service"}


def test_port_not_on_the_service() -> None:
    with pytest.raises(ServiceResolutionError) as info:
        resolver(svc()).resolve("ns", "api", 8080)
    assert info.value.reason == sr.SERVICE_PORT_ERROR
    assert str(info.value) == 'no service port 8080 found for service "api"'
    assert info.value.api_error().reason == "ServiceUnavailable"


def test_unsupported_type_and_kubes_endpoint_resolver_rejects_external_name() -> None:
    with pytest.raises(ServiceResolutionError, match='unsupported service type "Weird"'):
        resolver(svc(type_="Weird")).resolve("ns", "api", 443)
    with pytest.raises(ServiceResolutionError, match='unsupported service type "ExternalName"'):
        sr.resolve_endpoints(svc(type_="ExternalName", externalName="x"), [], None, 443)


def test_load_balancing_round_robin_and_random_cover_every_ready_endpoint() -> None:
    ports = [{"name": "https", "port": 8443}]
    objs = [svc(), slice_("api", [("10.1.0.1", True), ("10.1.0.2", True)], ports),
            slice_("api", [("10.1.0.3", True)], ports, name="api-2")]
    rr = resolver(*objs, picker=sr.round_robin_picker())
    seen = [rr.resolve("ns", "api", 443) for _ in range(6)]
    assert seen[:3] == seen[3:] and len(set(seen)) == 3
    rnd = resolver(*objs, picker=sr.random_picker(random.Random(7)))
    assert {rnd.resolve("ns", "api", 443) for _ in range(60)} == set(seen)


def test_primary_ip_family_slices_come_first() -> None:
    ports = [{"name": "https", "port": 8443}]
    service = svc(ipFamilies=["IPv6", "IPv4"])
    v4 = slice_("api", [("10.1.0.1", True)], ports, name="a")
    v6 = slice_("api", [("fd00::1", True)], ports, name="b", address_type="IPv6")
    assert resolver(service, v4, v6).resolve_all("ns", "api", 443) == ["https://[fd00::1]:8443",
                                                                        "https://10.1.0.1:8443"]


def test_availability_reasons_and_messages() -> None:
    ports = [{"name": "https", "port": 8443}]
    r = resolver(svc())
    missing = resolver().availability("ns", "api", 443)
    assert missing == sr.Availability("False", "ServiceNotFound", 'service/api in "ns" is not present')
    assert r.availability("ns", "api", 80) == sr.Availability(
        "False", "ServicePortError", 'service/api in "ns" is not listening on port 80')
    assert r.availability("ns", "api", 443) == sr.Availability(
        "False", "EndpointsNotFound", 'cannot find endpointslices for service/api in "ns"')
    not_ready = resolver(svc(), slice_("api", [("10.1.0.1", False)], ports))
    assert not_ready.availability("ns", "api", 443) == sr.Availability(
        "False", "MissingEndpoints",
        'endpointslices for service/api in "ns" have no addresses with port name "https"')
    assert resolver(svc(), slice_("api", [("10.1.0.1", True)], ports)).availability("ns", "api", 443) is None
    external = resolver(svc(type_="ExternalName", externalName="localhost"))
    assert external.availability("ns", "api", 443) is None
