"""APIService rules without a chain: validation, strategy, availability reasons, auto-registration,
discovery ordering and service-backed routing decisions."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

import pytest
from aggregator.apiservices import availability, discovery
from aggregator.apiservices.autoregister import desired_apiservices
from aggregator.apiservices.routes import ServiceRoutes, build_routes
from aggregator.apiservices.strategy import PRINTER, APIServiceStrategy
from aggregator.apiservices.types import INFO, set_condition
from aggregator.apiservices.validation import validate, validate_status
from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.apimachinery.serviceresolver import ServiceResolver, StaticLookup


def apiservice(name: str = "v1.foo.example.com", **spec: Any) -> dict[str, Any]:
    base = {"group": "foo.example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10,
            "service": None}
    base.update(spec)
    return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": name},
            "spec": base}


def messages(obj: dict[str, Any]) -> list[str]:
    return [str(e) for e in validate(obj)]


# -- validation ------------------------------------------------------------------------------
def test_a_valid_local_and_a_valid_service_backed_apiservice_pass() -> None:
    assert messages(apiservice()) == []
    assert messages(apiservice(service={"namespace": "ns", "name": "svc", "port": 443},
                               caBundle=base64.b64encode(b"pem").decode())) == []
    assert messages(apiservice("v1.", group="", version="v1")) == []


def test_the_name_must_be_version_dot_group() -> None:
    assert messages(apiservice("v1.bar.example.com")) == [
        'metadata.name: Invalid value: "v1.bar.example.com": must be `spec.version+"."+spec.group`: '
        '"v1.foo.example.com"']
    assert messages(apiservice("a/b", group="b", version="a")) == [
        "metadata.name: Invalid value: \"a/b\": may not contain '/'"]


@pytest.mark.parametrize(("field", "value", "message"), [
    ("groupPriorityMinimum", 0, "spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000"),
    ("groupPriorityMinimum", 20001,
     "spec.groupPriorityMinimum: Invalid value: 20001: must be positive and less than 20000"),
    ("versionPriority", -1, "spec.versionPriority: Invalid value: -1: must be positive and less than 1000"),
    ("versionPriority", 1001, "spec.versionPriority: Invalid value: 1001: must be positive and less than 1000"),
])
def test_priorities_out_of_range(field: str, value: int, message: str) -> None:
    obj = apiservice()
    obj["spec"][field] = value
    assert messages(obj) == [message]


def test_priorities_at_the_limits_pass() -> None:
    assert messages(apiservice(groupPriorityMinimum=20000, versionPriority=1000)) == []
    assert messages(apiservice(groupPriorityMinimum=1, versionPriority=1)) == []


def test_group_and_version_formats() -> None:
    assert messages(apiservice("v2.", group="", version="v2")) == [
        "spec.group: Required value: only v1 may have an empty group and it better be legacy kube"]
    bad = messages(apiservice("V1.foo.example.com", version="V1"))
    assert any(m.startswith('spec.version: Invalid value: "V1": a DNS-1035 label must consist of lower case')
               for m in bad)
    bad = messages(apiservice("v1.Foo_Bar", group="Foo_Bar"))
    assert any(m.startswith('spec.group: Invalid value: "Foo_Bar": a lowercase RFC 1123 subdomain') for m in bad)


def test_tls_settings() -> None:
    bundle = base64.b64encode(b"12345").decode()
    assert messages(apiservice(caBundle=bundle, insecureSkipTLSVerify=True)) == [
        'spec.caBundle: Invalid value: "5 bytes": local APIServices may not have a caBundle',
        "spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify"]
    assert messages(apiservice(service={"namespace": "ns", "name": "svc", "port": 443}, caBundle=bundle,
                               insecureSkipTLSVerify=True)) == [
        "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present"]
    assert messages(apiservice(service={"port": 443})) == [
        "spec.service.namespace: Required value", "spec.service.name: Required value"]


def test_condition_statuses() -> None:
    obj = apiservice()
    obj["status"] = {"conditions": [{"type": "Available", "status": "True"}, {"type": "Available", "status": "Maybe"}]}
    assert [str(e) for e in validate_status(obj)] == [
        'status.conditions[1].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown"']


# -- strategy and printing ---------------------------------------------------------------------
def test_create_clears_status_marks_local_available_and_defaults_the_port() -> None:
    strategy = APIServiceStrategy(INFO, SchemaCatalog.load())
    local = apiservice()
    local["status"] = {"conditions": [{"type": "Available", "status": "False"}]}
    strategy.prepare_for_create(local)
    strategy.default(local)
    [cond] = local["status"]["conditions"]
    assert (cond["status"], cond["reason"], cond["message"]) == \
        ("True", "Local", "Local APIServices are always available")
    remote = apiservice(service={"namespace": "ns", "name": "svc"})
    del remote["spec"]["versionPriority"]
    strategy.prepare_for_create(remote)
    strategy.default(remote)
    assert remote["status"] == {}
    assert remote["spec"]["service"]["port"] == 443
    assert remote["spec"]["versionPriority"] == 0
    assert [str(e) for e in strategy.validate(remote)] == [
        "spec.versionPriority: Invalid value: 0: must be positive and less than 1000"]


def cells(obj: dict[str, Any], now: datetime) -> list[Any]:
    out = PRINTER.cells(obj, now)
    assert isinstance(out, list)
    return out


def test_table_cells() -> None:
    now = datetime(2025, 1, 1, 0, 1, 0, tzinfo=UTC)
    obj = apiservice(service={"namespace": "ns", "name": "svc", "port": 443})
    obj["metadata"]["creationTimestamp"] = "2025-01-01T00:00:00Z"
    assert cells(obj, now) == ["v1.foo.example.com", "ns/svc", "Unknown", "60s"]
    set_condition(obj, {"type": "Available", "status": "False", "reason": "MissingEndpoints", "message": "m"})
    assert cells(obj, now)[2] == "False (MissingEndpoints)"
    set_condition(obj, {"type": "Available", "status": "True", "reason": "Passed", "message": "all checks passed"})
    assert cells(obj, now)[2] == "True"
    assert cells(apiservice(), now)[1] == "Local"
    assert [c["name"] for c in PRINTER.columns] == ["Name", "Service", "Available", "Age"]


def test_set_condition_keeps_the_transition_time_while_the_status_holds() -> None:
    obj = apiservice()
    set_condition(obj, {"type": "Available", "status": "False", "lastTransitionTime": "t1", "reason": "A",
                        "message": "a"})
    set_condition(obj, {"type": "Available", "status": "False", "lastTransitionTime": "t2", "reason": "B",
                        "message": "b"})
    assert obj["status"]["conditions"] == [{"type": "Available", "status": "False", "lastTransitionTime": "t1",
                                            "reason": "B", "message": "b"}]
    set_condition(obj, {"type": "Available", "status": "True", "lastTransitionTime": "t3", "reason": "Passed",
                        "message": "all checks passed"})
    assert obj["status"]["conditions"][0]["lastTransitionTime"] == "t3"


# -- availability reasons ------------------------------------------------------------------------
def service(kind: str = "ClusterIP", port: int = 443, name: str = "https") -> dict[str, Any]:
    spec: dict[str, Any] = {"type": kind, "ports": [{"name": name, "port": port, "targetPort": 8443}]}
    if kind == "ExternalName":
        spec = {"type": kind, "externalName": "backend.example.com", "ports": spec["ports"]}
    else:
        spec["clusterIP"] = "10.0.0.20"
    return {"metadata": {"namespace": "ns", "name": "svc"}, "spec": spec}


def endpoint_slice(ready: bool = True, port_name: str = "https") -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": "svc-abc", "labels": {"kubernetes.io/service-name": "svc"}},
            "addressType": "IPv4", "ports": [{"name": port_name, "port": 8443}],
            "endpoints": [{"addresses": ["10.1.0.5"], "conditions": {"ready": ready}}]}


class FakeProbe:
    def __init__(self, error: str | None = None) -> None:
        self.error = error
        self.urls: list[str] = []

    async def __call__(self, url: str) -> str | None:
        self.urls.append(url)
        return self.error


REMOTE = apiservice(service={"namespace": "ns", "name": "svc", "port": 443})


async def run_check(services: list[dict[str, Any]], slices: list[dict[str, Any]], probe: FakeProbe,
                    obj: dict[str, Any] = REMOTE) -> availability.Check:
    return await availability.check(obj, ServiceResolver(StaticLookup(services, slices)), probe)


async def test_local_apiservices_are_always_available() -> None:
    result = await run_check([], [], FakeProbe("unused"), apiservice())
    assert result == availability.Check("True", "Local", "Local APIServices are always available")


async def test_service_not_found() -> None:
    assert await run_check([], [], FakeProbe()) == availability.Check(
        "False", "ServiceNotFound", 'service/svc in "ns" is not present')


async def test_service_port_error() -> None:
    assert await run_check([service(port=444)], [endpoint_slice()], FakeProbe()) == availability.Check(
        "False", "ServicePortError", 'service/svc in "ns" is not listening on port 443')


async def test_endpoints_not_found() -> None:
    assert await run_check([service()], [], FakeProbe()) == availability.Check(
        "False", "EndpointsNotFound", 'cannot find endpointslices for service/svc in "ns"')


async def test_missing_endpoints() -> None:
    expected = availability.Check(
        "False", "MissingEndpoints", 'endpointslices for service/svc in "ns" have no addresses with port name "https"')
    assert await run_check([service()], [endpoint_slice(ready=False)], FakeProbe()) == expected
    assert await run_check([service()], [endpoint_slice(port_name="other")], FakeProbe()) == expected


async def test_passed_probes_the_ready_endpoint_with_the_discovery_path() -> None:
    probe = FakeProbe()
    assert await run_check([service()], [endpoint_slice()], probe) == availability.Check(
        "True", "Passed", "all checks passed")
    assert probe.urls[0] == "https://10.1.0.5:8443/apis/foo.example.com/v1"


async def test_failed_discovery_check_reports_the_last_error() -> None:
    probe = FakeProbe("bad status from https://backend.example.com:443/apis/foo.example.com/v1: 403")
    result = await run_check([service("ExternalName")], [], probe)
    assert result == availability.Check("False", "FailedDiscoveryCheck",
                                        "bad status from https://backend.example.com:443/apis/foo.example.com/v1: 403")
    assert len(probe.urls) == availability.ATTEMPTS


async def test_an_unsynced_service_cache_is_a_service_access_error() -> None:
    result = await availability.check(REMOTE, ServiceResolver(StaticLookup()), FakeProbe(), synced=False)
    assert (result.status, result.reason) == ("Unknown", "ServiceAccessError")
    assert result.message.startswith('service/svc in "ns" cannot be checked due to: ')


def test_the_core_group_is_probed_at_api() -> None:
    assert availability.discovery_path(apiservice("v1.", group="", version="v1")) == "/api/v1"
    assert availability.discovery_path(REMOTE) == "/apis/foo.example.com/v1"


def test_go_error_texts() -> None:
    url = "https://localhost:1/apis/g/v"
    assert availability.go_error(url, TimeoutError()) == \
        f'Get "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'


# -- auto-registration -------------------------------------------------------------------------------
def crd(group: str, *versions: tuple[str, bool]) -> dict[str, Any]:
    return {"spec": {"group": group, "versions": [{"name": v, "served": s} for v, s in versions]}}


def test_desired_apiservices() -> None:
    want = desired_apiservices([("", "v1"), ("apps", "v1"), ("unknown.example.com", "v1"), ("crd.example.com", "v1")],
                               [crd("crd.example.com", ("v1", True), ("v2", False))])
    assert want == {
        "v1.crd.example.com": ({"service": None, "group": "crd.example.com", "version": "v1",
                                "groupPriorityMinimum": 1000, "versionPriority": 100}, "true"),
        "v1.": ({"service": None, "group": "", "version": "v1", "groupPriorityMinimum": 18000,
                 "versionPriority": 1}, "onstart"),
        "v1.apps": ({"service": None, "group": "apps", "version": "v1", "groupPriorityMinimum": 17800,
                     "versionPriority": 15}, "onstart"),
    }


# -- discovery ordering and routing ------------------------------------------------------------------
def test_legacy_apis_follow_apiservice_priorities() -> None:
    services = [apiservice("v1.b.example.com", group="b.example.com", groupPriorityMinimum=500),
                apiservice("v1.a.example.com", group="a.example.com", groupPriorityMinimum=500),
                apiservice("v1beta1.a.example.com", group="a.example.com", version="v1beta1",
                           groupPriorityMinimum=900, versionPriority=10),
                apiservice("v1.", group="", version="v1", groupPriorityMinimum=18000)]
    own = {"name": "apiregistration.k8s.io", "versions": [], "preferredVersion": {}}
    members = {"kind": "APIGroupList", "groups": [{"name": "late.example.com"}, {"name": "b.example.com"}]}
    doc = discovery.legacy_apis(members, own, services)
    assert [g["name"] for g in doc["groups"]] == ["apiregistration.k8s.io", "a.example.com", "b.example.com",
                                                  "late.example.com"]
    a = doc["groups"][1]
    assert [v["version"] for v in a["versions"]] == ["v1", "v1beta1"]  # equal priority: kube-aware order
    assert a["preferredVersion"]["version"] == "v1"


def test_aggregated_discovery_adds_fetched_service_versions_in_order() -> None:
    remote = apiservice("v1.remote.example.com", group="remote.example.com", groupPriorityMinimum=17000,
                        service={"namespace": "ns", "name": "svc", "port": 443}, insecureSkipTLSVerify=True)
    set_condition(remote, {"type": "Available", "status": "True"})
    routes, _dropped = build_routes([remote], ServiceRoutes(), None, lambda _s: [])
    members = {"kind": "APIGroupDiscoveryList", "items": [
        {"metadata": {"name": "apps"}, "versions": [{"version": "v1"}]}]}
    own = {"metadata": {"name": "apiregistration.k8s.io"}, "versions": []}
    entry = discovery.from_resource_list("v1", {"resources": [
        {"name": "things", "singularName": "thing", "namespaced": True, "kind": "Thing", "verbs": ["get"]},
        {"name": "things/status", "kind": "Thing", "verbs": ["get"]}]})
    doc = discovery.aggregated_apis(members, own, [remote, apiservice("v1.apps", group="apps",
                                                                      groupPriorityMinimum=17800)],
                                    routes, {"v1.remote.example.com": entry})
    assert [i["metadata"]["name"] for i in doc["items"]] == ["apiregistration.k8s.io", "apps", "remote.example.com"]
    [version] = doc["items"][2]["versions"]
    assert version["freshness"] == "Current"
    assert version["resources"][0]["scope"] == "Namespaced"
    assert version["resources"][0]["subresources"][0]["subresource"] == "status"


def test_routes_only_cover_service_backed_apiservices() -> None:
    remote = apiservice(service={"namespace": "ns", "name": "svc", "port": 8443}, insecureSkipTLSVerify=True)
    routes, _ = build_routes([apiservice("v1.apps", group="apps"), remote], ServiceRoutes(), None, lambda _s: [])
    route = routes.route_for("/apis/foo.example.com/v1/namespaces/x/things")
    assert route is not None and route.ref.port == 8443 and not route.available and route.proxy is not None
    assert routes.route_for("/apis/apps/v1/deployments") is None
    assert routes.route_for("/apis/foo.example.com") is None
    again, dropped = build_routes([remote], routes, None, lambda _s: [])
    assert again.by_group_version[("foo.example.com", "v1")].proxy is route.proxy and dropped == []
    bad = apiservice(service={"namespace": "ns", "name": "svc"}, caBundle=base64.b64encode(b"not a pem").decode())
    broken, dropped = build_routes([bad], again, None, lambda _s: [])
    assert broken.by_group_version[("foo.example.com", "v1")].proxy is None
    assert broken.by_group_version[("foo.example.com", "v1")].error
    assert dropped == [route.proxy]
