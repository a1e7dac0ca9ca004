"""Service ClusterIP and NodePort allocation on the running chain (real kubectl and HTTP):
addresses from the configured ranges, kube-apiserver's messages for taken and out-of-range
requests, release on delete, nothing leaked by failed or dry-run requests, no duplicates under
concurrent creates."""

from __future__ import annotations

import ipaddress
import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from support.procs import ChainHandle

pytestmark = pytest.mark.integration

RANGE = ipaddress.ip_network("10.0.0.0/24")


def ns(chain: ChainHandle, name: str) -> str:
    chain.kubectl("create", "namespace", name)
    return name


def svc_json(chain: ChainHandle, namespace: str, name: str) -> dict[str, Any]:
    return json.loads(chain.kubectl("get", "service", name, "-n", namespace, "-o", "json").stdout)  # type: ignore[no-any-return]


def ip_object(chain: ChainHandle, ip: str) -> dict[str, Any] | None:
    status, body = chain.json("GET", f"/apis/networking.k8s.io/v1/ipaddresses/{ip}")
    return body if status == 200 else None


def service(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "ClusterIP", "ports": [{"port": 80, "protocol": "TCP"}]}
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": body}


def create(chain: ChainHandle, namespace: str, obj: dict[str, Any], query: str = "") -> tuple[int, Any]:
    return chain.json("POST", f"/api/v1/namespaces/{namespace}/services{query}", obj)


def test_kubernetes_service_holds_the_first_address(chain: ChainHandle) -> None:
    svc = svc_json(chain, "default", "kubernetes")
    assert svc["spec"]["clusterIP"] == "10.0.0.1"
    assert svc["spec"]["clusterIPs"] == ["10.0.0.1"]
    owner = ip_object(chain, "10.0.0.1")
    assert owner is not None
    assert owner["spec"]["parentRef"] == {"resource": "services", "namespace": "default", "name": "kubernetes"}
    assert owner["metadata"]["labels"]["ipaddress.kubernetes.io/managed-by"] == "ipallocator.k8s.io"
    status, cidr = chain.json("GET", "/apis/networking.k8s.io/v1/servicecidrs/kubernetes")
    assert status == 200
    assert cidr["spec"]["cidrs"] == ["10.0.0.0/24"]
    assert [c["type"] for c in cidr["status"]["conditions"]] == ["Ready"]


def test_expose_and_create_service_get_distinct_addresses(chain: ChainHandle) -> None:
    n = ns(chain, "alloc-kubectl")
    chain.kubectl("create", "deployment", "web", "--image=nginx:1.25", "-n", n)
    chain.kubectl("expose", "deployment", "web", "--port=80", "-n", n)
    chain.kubectl("create", "service", "clusterip", "plain", "--tcp=80:8080", "-n", n)
    chain.kubectl("create", "service", "nodeport", "np", "--tcp=80:8080", "-n", n)
    ips = []
    for name in ("web", "plain", "np"):
        spec = svc_json(chain, n, name)["spec"]
        ip = spec["clusterIP"]
        assert ipaddress.ip_address(ip) in RANGE and ip not in ("10.0.0.0", "10.0.0.255")
        assert spec["clusterIPs"] == [ip]
        assert spec["ipFamilies"] == ["IPv4"]
        assert spec["ipFamilyPolicy"] == "SingleStack"
        owner = ip_object(chain, ip)
        assert owner is not None and owner["spec"]["parentRef"]["name"] == name
        ips.append(ip)
    assert len(set(ips)) == 3
    node_port = svc_json(chain, n, "np")["spec"]["ports"][0]["nodePort"]
    assert 30000 <= node_port <= 32767
    assert "nodePort" not in svc_json(chain, n, "plain")["spec"]["ports"][0]
    table = chain.kubectl("get", "svc", "np", "-n", n).stdout
    assert f"80:{node_port}/TCP" in table


def test_taken_address_and_port_get_kube_messages(chain: ChainHandle) -> None:
    n = ns(chain, "alloc-taken")
    manifest = json.dumps(service("taken", clusterIP="10.0.0.1"))
    out = chain.kubectl("create", "-n", n, "-f", "-", input=manifest, check=False)
    assert out.returncode != 0
    assert ('The Service "taken" is invalid: spec.clusterIPs: Invalid value: []string{"10.0.0.1"}: '
            "failed to allocate IP 10.0.0.1: provided IP is already allocated") in out.stderr
    status, body = create(chain, n, service("taken", clusterIP="10.0.0.1"))
    assert status == 422 and body["reason"] == "Invalid"
    assert body["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "spec.clusterIPs",
        "message": 'Invalid value: []string{"10.0.0.1"}: failed to allocate IP 10.0.0.1: '
                   "provided IP is already allocated"}]

    status, first = create(chain, n, service("first", type="NodePort"))
    assert status == 201, first
    port = first["spec"]["ports"][0]["nodePort"]
    second = service("second", type="NodePort", ports=[{"port": 80, "protocol": "TCP", "nodePort": port}])
    out = chain.kubectl("create", "-n", n, "-f", "-", input=json.dumps(second), check=False)
    assert out.returncode != 0
    assert (f'The Service "second" is invalid: spec.ports[0].nodePort: Invalid value: {port}: '
            "provided port is already allocated") in out.stderr
    # the failed create left no address behind: same count of IPAddress objects for this namespace
    status, listed = chain.json("GET", "/apis/networking.k8s.io/v1/ipaddresses")
    owners = [i["spec"]["parentRef"]["name"] for i in listed["items"] if i["spec"]["parentRef"]["namespace"] == n]
    assert sorted(owners) == ["first"]


@pytest.mark.parametrize("ip", ["10.1.2.3", "10.0.0.0", "10.0.0.255", "192.168.0.1"])
def test_out_of_range_address(chain: ChainHandle, ip: str) -> None:
    n = f"alloc-range-{ip.replace('.', '-')}"
    ns(chain, n)
    out = chain.kubectl("create", "-n", n, "-f", "-", input=json.dumps(service("far", clusterIP=ip)), check=False)
    assert out.returncode != 0
    assert (f'The Service "far" is invalid: spec.clusterIPs: Invalid value: []string{{"{ip}"}}: '
            f"failed to allocate IP {ip}: the provided network does not match the current range") in out.stderr
    assert ip_object(chain, ip) is None


def test_node_port_outside_range(chain: ChainHandle) -> None:
    n = ns(chain, "alloc-portrange")
    obj = service("far", type="NodePort", clusterIP="10.0.0.14",
                  ports=[{"port": 80, "protocol": "TCP", "nodePort": 40000}])
    out = chain.kubectl("create", "-n", n, "-f", "-", input=json.dumps(obj), check=False)
    assert out.returncode != 0
    assert ('The Service "far" is invalid: spec.ports[0].nodePort: Invalid value: 40000: provided port is not '
            "in the valid range. The range of valid ports is 30000-32767") in out.stderr
    assert ip_object(chain, "10.0.0.14") is None  # the address taken before the port failed is back


def test_delete_releases_address_and_port(chain: ChainHandle) -> None:
    n = ns(chain, "alloc-release")
    obj = service("mine", type="NodePort", clusterIP="10.0.0.9",
                  ports=[{"port": 80, "protocol": "TCP", "nodePort": 30009}])
    assert create(chain, n, obj)[0] == 201
    assert create(chain, n, {**obj, "metadata": {"name": "other"}})[0] == 422
    chain.kubectl("delete", "service", "mine", "-n", n)
    assert ip_object(chain, "10.0.0.9") is None
    status, again = create(chain, n, {**obj, "metadata": {"name": "other"}})
    assert status == 201, again
    assert again["spec"]["clusterIP"] == "10.0.0.9" and again["spec"]["ports"][0]["nodePort"] == 30009
    # delete-collection goes through the same store delete: releases too
    chain.kubectl("delete", "service", "--all", "-n", n)
    assert ip_object(chain, "10.0.0.9") is None
    assert create(chain, n, {**obj, "metadata": {"name": "third"}})[0] == 201


def test_failed_creates_and_dry_run_allocate_nothing(chain: ChainHandle) -> None:
    n = ns(chain, "alloc-noleak")
    bad = service("Bad_Name", type="NodePort", clusterIP="10.0.0.11",
                  ports=[{"port": 80, "protocol": "TCP", "nodePort": 30011}])
    status, body = create(chain, n, bad)
    assert status == 422 and body["details"]["causes"][0]["field"] == "metadata.name"
    assert ip_object(chain, "10.0.0.11") is None
    assert create(chain, n, service("dup"))[0] == 201
    status, body = create(chain, n, service("dup", clusterIP="10.0.0.12"))
    assert status == 409 and body["reason"] == "AlreadyExists"
    assert ip_object(chain, "10.0.0.12") is None
    before = chain.json("GET", "/apis/networking.k8s.io/v1/ipaddresses")[1]["items"]
    out = chain.kubectl("create", "service", "nodeport", "dry", "--tcp=80", "-n", n, "--dry-run=server", "-o", "json")
    dry = json.loads(out.stdout)
    assert dry["spec"]["clusterIP"] == "10.0.0.0"  # kube's dry-run answers the range's network address
    assert dry["spec"]["ports"][0]["nodePort"] == 32769  # and invented ports past the range
    status, _ = create(chain, n, service("dry2", clusterIP="10.0.0.15"), "?dryRun=All")
    assert status == 201
    after = chain.json("GET", "/apis/networking.k8s.io/v1/ipaddresses")[1]["items"]
    assert len(after) == len(before)
    assert ip_object(chain, "10.0.0.15") is None
    # the ports the failed create asked for are free
    good = service("good", type="NodePort", clusterIP="10.0.0.11",
                   ports=[{"port": 80, "protocol": "TCP", "nodePort": 30011}])
    assert create(chain, n, good)[0] == 201


def test_updates_keep_and_type_changes_move_allocations(chain: ChainHandle) -> None:
    n = ns(chain, "alloc-update")
    status, created = create(chain, n, service("t"))
    assert status == 201
    ip = created["spec"]["clusterIP"]
    # a PUT that leaves out clusterIP/clusterIPs keeps them
    body = dict(created)
    body["spec"] = {k: v for k, v in created["spec"].items() if k not in ("clusterIP", "clusterIPs")}
    status, updated = chain.json("PUT", f"/api/v1/namespaces/{n}/services/t", body)
    assert status == 200, updated
    assert updated["spec"]["clusterIP"] == ip and updated["spec"]["clusterIPs"] == [ip]
    # ClusterIP -> NodePort allocates a port
    chain.kubectl("patch", "service", "t", "-n", n, "-p", '{"spec":{"type":"NodePort"}}')
    spec = svc_json(chain, n, "t")["spec"]
    port = spec["ports"][0]["nodePort"]
    assert 30000 <= port <= 32767 and spec["clusterIP"] == ip
    # NodePort -> ClusterIP drops and releases the port
    chain.kubectl("patch", "service", "t", "-n", n, "-p", '{"spec":{"type":"ClusterIP"}}')
    assert "nodePort" not in svc_json(chain, n, "t")["spec"]["ports"][0]
    reuse = service("reuse", type="NodePort", ports=[{"port": 80, "protocol": "TCP", "nodePort": port}])
    assert create(chain, n, reuse)[0] == 201
    # -> ExternalName drops and releases the address
    chain.kubectl("patch", "service", "t", "-n", n, "-p",
                  '{"spec":{"type":"ExternalName","externalName":"example.com"}}')
    spec = svc_json(chain, n, "t")["spec"]
    assert "clusterIP" not in spec and "clusterIPs" not in spec
    assert ip_object(chain, ip) is None
    # headless gets nothing
    status, headless = create(chain, n, service("headless", clusterIP="None", selector={"app": "x"}))
    assert status == 201
    assert headless["spec"]["clusterIPs"] == ["None"]
    assert headless["spec"]["ipFamilies"] == ["IPv4"] and headless["spec"]["ipFamilyPolicy"] == "SingleStack"


def test_load_balancer_local_gets_health_check_port(chain: ChainHandle) -> None:
    n = ns(chain, "alloc-lb")
    status, lb = create(chain, n, service("lb", type="LoadBalancer", externalTrafficPolicy="Local"))
    assert status == 201, lb
    hc = lb["spec"]["healthCheckNodePort"]
    assert 30000 <= hc <= 32767 and hc != lb["spec"]["ports"][0]["nodePort"]
    chain.kubectl("delete", "service", "lb", "-n", n)
    again = service("again", type="NodePort", ports=[{"port": 80, "protocol": "TCP", "nodePort": hc}])
    assert create(chain, n, again)[0] == 201


def test_concurrent_creates_never_share(chain: ChainHandle) -> None:
    n = ns(chain, "alloc-race")
    count = 40

    def make(i: int) -> tuple[int, Any]:
        return create(chain, n, service(f"race-{i}", type="NodePort"))

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(make, range(count)))
    assert all(status == 201 for status, _ in results), [b for s, b in results if s != 201][:2]
    ips = [b["spec"]["clusterIP"] for _, b in results]
    ports = [b["spec"]["ports"][0]["nodePort"] for _, b in results]
    assert len(set(ips)) == count and len(set(ports)) == count
    listed = chain.json("GET", "/apis/networking.k8s.io/v1/ipaddresses")[1]["items"]
    ours = {i["metadata"]["name"] for i in listed if i["spec"]["parentRef"]["namespace"] == n}
    assert ours == set(ips)


def test_namespace_deletion_releases(chain: ChainHandle) -> None:
    n = ns(chain, "alloc-nsdel")
    assert create(chain, n, service("gone", clusterIP="10.0.0.13"))[0] == 201
    chain.kubectl("delete", "namespace", n, "--wait=false")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and ip_object(chain, "10.0.0.13") is not None:
        time.sleep(0.2)
    assert ip_object(chain, "10.0.0.13") is None
