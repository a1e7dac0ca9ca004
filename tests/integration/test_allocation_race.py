"""Two replicas of core-api never hand out the same ClusterIP or NodePort, on real etcd.

In process: two complete core-api server stacks (separate stores, watch caches and allocators, as
two processes have) on one etcd prefix create Services at the same time, in ranges small enough
that they run out; afterwards the IPAddress objects and the node-port bitmap in etcd match the
Services exactly. Across processes: a second core-api started against the running chain's etcd
creates Services through its own port while the chain's core-api does through its Unix socket.
"""

from __future__ import annotations

import asyncio
import ipaddress
import tempfile
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from coreapi.allocation import PortRange, ServiceIPRange
from coreapi.allocation.portallocator import PortBitmap
from coreapi.server import build_server
from genericapi.apimachinery.errors import APIError
from genericapi.registry.options import DeleteOptions, ListOptions
from genericapi.server.apiserver import GenericAPIServer, ServerConfig
from genericapi.storage.etcd import EtcdClient
from support.coreapi_procs import CoreAPIProcess, backend_request
from support.procs import ChainHandle

pytestmark = pytest.mark.integration

CIDR = "10.77.0.0/27"  # 30 usable addresses, the first one for default/kubernetes
PORTS = "30100-30119"  # 20 node ports


def service(name: str, node_port: bool, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "NodePort" if node_port else "ClusterIP",
                            "ports": [{"port": 80, "protocol": "TCP"}], **spec}
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": body}


@pytest.fixture
async def replicas(etcd_server: Any) -> AsyncIterator[tuple[GenericAPIServer, GenericAPIServer, str]]:
    prefix = f"/alloc-race-{uuid.uuid4().hex[:8]}"
    servers = []
    for _ in range(2):
        config = ServerConfig("core-api", [etcd_server.endpoint], etcd_prefix=prefix, watch_cache_size=500)
        servers.append(build_server(config, controllers=None, service_cidr=ServiceIPRange.parse(CIDR),
                                    node_ports=PortRange.parse(PORTS)))
    # Started one after the other (each bootstraps, the second finds it done), like a rolling start.
    for s in servers:
        await s.start()
    try:
        yield servers[0], servers[1], prefix
    finally:
        for s in servers:
            await s.stop()


async def _stored_state(server: GenericAPIServer, prefix: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                                        list[int]]:
    """Services, IPAddress objects and bitmap ports, read from etcd (not from any cache)."""
    svcs = server.by_resource[("", "services")]
    ips = server.by_resource[("networking.k8s.io", "ipaddresses")]
    services = [o for o, _ in (await svcs.list("", ListOptions(limit=10_000))).items]
    addresses = [o for o, _ in (await ips.list("", ListOptions(limit=10_000))).items]
    etcd = EtcdClient(server.config.etcd_endpoints)
    try:
        kv, _ = await etcd.get(f"{prefix}/ranges/servicenodeports".encode())
    finally:
        await etcd.close()
    ports = PortBitmap.decode(PortRange.parse(PORTS), kv.value).taken() if kv is not None else []
    return services, addresses, ports


def _assert_records_match(services: list[dict[str, Any]], addresses: list[dict[str, Any]], ports: list[int]) -> None:
    held_ips = [ip for s in services for ip in s["spec"].get("clusterIPs") or [] if ip != "None"]
    assert len(held_ips) == len(set(held_ips)), f"duplicate ClusterIPs: {Counter(held_ips).most_common(3)}"
    for ip in held_ips:
        assert ipaddress.ip_address(ip) in ipaddress.ip_network(CIDR)
    by_ip = {a["metadata"]["name"]: a["spec"]["parentRef"] for a in addresses}
    assert sorted(by_ip) == sorted(held_ips), "IPAddress objects differ from the Services' ClusterIPs"
    for s in services:
        for ip in s["spec"].get("clusterIPs") or []:
            assert by_ip[ip] == {"resource": "services", "namespace": s["metadata"]["namespace"],
                                 "name": s["metadata"]["name"]}
    held_ports = [p["nodePort"] for s in services for p in s["spec"].get("ports") or [] if p.get("nodePort")]
    assert len(held_ports) == len(set(held_ports)), f"duplicate nodePorts: {Counter(held_ports).most_common(3)}"
    assert sorted(held_ports) == ports, "the node-port bitmap differs from the Services' nodePorts"


async def test_two_stacks_on_one_etcd_never_share_an_address(
        replicas: tuple[GenericAPIServer, GenericAPIServer, str]) -> None:
    a, b, prefix = replicas
    ns = "race"
    await a.by_resource[("", "namespaces")].create("", {"metadata": {"name": ns}})

    async def create(server: GenericAPIServer, name: str, node_port: bool) -> dict[str, Any] | APIError:
        try:
            return await server.by_resource[("", "services")].create(ns, service(name, node_port))
        except APIError as err:
            return err

    async def race(count: int, node_port: bool, tag: str) -> tuple[list[dict[str, Any]], list[APIError]]:
        jobs = [create(a if i % 2 else b, f"{tag}{i}", node_port) for i in range(count)]
        results = await asyncio.gather(*jobs)
        return [r for r in results if isinstance(r, dict)], [r for r in results if isinstance(r, APIError)]

    def full(errors: list[APIError], what: str) -> None:
        for err in errors:
            assert err.code == 500 and err.reason == "InternalError", err.message
            assert err.message == f"Internal error occurred: failed to allocate a {what}: range is full"

    # 24 NodePort Services want 24 of the 20 node ports (and 24 of 29 free addresses).
    made, failed = await race(24, True, "n")
    assert len(made) == 20 and len(failed) == 4, [f.message for f in failed]
    full(failed, "nodePort")
    # 14 ClusterIP Services want the 9 addresses left.
    made, failed = await race(14, False, "c")
    assert len(made) == 9 and len(failed) == 5, [f.message for f in failed]
    full(failed, "serviceIP")
    services, addresses, ports = await _stored_state(a, prefix)
    assert len(services) == 30  # with default/kubernetes
    _assert_records_match(services, addresses, ports)
    assert len(addresses) == 30 and len(ports) == 20  # both ranges are full

    # Replica b deletes what a created, while a creates again: released space is reused, never doubled.
    ours = [s["metadata"]["name"] for s in services if s["metadata"]["namespace"] == ns]
    deletes = [b.by_resource[("", "services")].delete(ns, name, DeleteOptions()) for name in ours[::2]]

    async def create_when_free(name: str) -> dict[str, Any] | APIError:
        for _ in range(100):  # full until replica b's deletes release something
            result = await create(a, name, node_port=True)
            if not isinstance(result, APIError) or "range is full" not in result.message:
                return result
            await asyncio.sleep(0.02)
        return result

    outcome = await asyncio.gather(*deletes, *(create_when_free(f"r{i}") for i in range(8)))
    assert all(gone for _obj, gone in outcome[:len(deletes)])  # type: ignore[misc]
    assert all(isinstance(r, dict) for r in outcome[len(deletes):]), outcome[len(deletes):]
    services, addresses, ports = await _stored_state(b, prefix)
    _assert_records_match(services, addresses, ports)
    assert len([s for s in services if s["metadata"]["name"].startswith("r")]) == 8

    # A taken address or port asked for on the other replica: kube's 422, nothing allocated.
    taken = next(s for s in services if s["metadata"]["namespace"] == ns and s["spec"]["type"] == "NodePort")
    with pytest.raises(APIError) as err:
        await b.by_resource[("", "services")].create(ns, service("dup-ip", False, clusterIP=taken["spec"]["clusterIP"]))
    assert err.value.code == 422
    assert err.value.message == (f'Service "dup-ip" is invalid: spec.clusterIPs: Invalid value: '
                                 f'[]string{{"{taken["spec"]["clusterIP"]}"}}: failed to allocate IP '
                                 f'{taken["spec"]["clusterIP"]}: provided IP is already allocated')
    port = taken["spec"]["ports"][0]["nodePort"]
    spec = {"ports": [{"port": 80, "protocol": "TCP", "nodePort": port}]}
    with pytest.raises(APIError) as err:
        await a.by_resource[("", "services")].create(ns, service("dup-port", True, **spec))
    assert err.value.code == 422
    with pytest.raises(APIError) as err:
        await b.by_resource[("", "services")].create(ns, service("far-port", True, ports=[
            {"port": 80, "protocol": "TCP", "nodePort": 31000}]))
    assert err.value.code == 422
    assert "provided port is not in the valid range. The range of valid ports is 30100-30119" in err.value.message
    after = await _stored_state(a, prefix)
    assert sorted(a["metadata"]["name"] for a in after[1]) == sorted(x["metadata"]["name"] for x in addresses)
    assert after[2] == ports
    _assert_records_match(*after)


# -- two real processes: the chain's core-api and a second one on the chain's etcd ------------------
def test_second_core_api_process_on_the_chains_etcd(chain: ChainHandle) -> None:
    c = chain.chain
    ns = f"alloc-2proc-{uuid.uuid4().hex[:6]}"
    status, body = chain.json("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    assert status == 201, body
    log = Path(tempfile.mkdtemp(prefix="core-replica-")) / "core-api.log"
    # The chain's Secrets are encrypted at rest: a process without the key could not list them.
    second = CoreAPIProcess(c.etcd_endpoints, c.etcd_prefix, log, controllers=False,
                            extra_args=c.encryption_args()).start()
    try:
        second.wait_ready()
        first_url = c.backend_urls["core-api"]  # the chain's own core-api, over its Unix socket

        def create(url: str, name: str, node_port: bool) -> tuple[int, Any]:
            return backend_request(url, "POST", f"/api/v1/namespaces/{ns}/services", service(name, node_port))

        with ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(create, url, f"{tag}{i}", i % 2 == 0)
                       for i in range(20) for tag, url in (("p", first_url), ("q", second.url))]
            results = [f.result() for f in futures]
        assert all(s == 201 for s, _ in results), [b for s, b in results if s != 201][:3]
        # Every Service of the cluster (other tests' too) against every record, read through the gateway.
        _s, listed = chain.json("GET", "/api/v1/services")
        _s, ips = chain.json("GET", "/apis/networking.k8s.io/v1/ipaddresses")
        services = listed["items"]
        ours = [s for s in services if s["metadata"]["namespace"] == ns]
        assert len(ours) == 40
        held = [ip for s in services for ip in s["spec"].get("clusterIPs") or [] if ip != "None"]
        assert len(held) == len(set(held))
        assert sorted(i["metadata"]["name"] for i in ips["items"]) == sorted(held)
        node_ports = [p["nodePort"] for s in services for p in s["spec"].get("ports") or [] if p.get("nodePort")]
        assert len(node_ports) == len(set(node_ports))
        assert len([p for s in ours for p in s["spec"]["ports"] if p.get("nodePort")]) == 20
        from support.coreapi_procs import etcd_value

        raw = etcd_value(c.etcd_endpoints, f"{c.etcd_prefix}/ranges/servicenodeports")
        assert PortBitmap.decode(PortRange.parse("30000-32767"), raw).taken() == sorted(node_ports)
        # Deleting through the second process releases what the first allocated, and the reverse.
        for s in ours:
            url = second.url if s["metadata"]["name"].startswith("p") else first_url
            status, _ = backend_request(url, "DELETE", f"/api/v1/namespaces/{ns}/services/{s['metadata']['name']}")
            assert status == 200
        _s, ips = chain.json("GET", "/apis/networking.k8s.io/v1/ipaddresses")
        assert not [i for i in ips["items"] if i["spec"]["parentRef"]["namespace"] == ns]
        raw = etcd_value(c.etcd_endpoints, f"{c.etcd_prefix}/ranges/servicenodeports")
        ours_ports = {p["nodePort"] for s in ours for p in s["spec"]["ports"] if p.get("nodePort")}
        assert not ours_ports & set(PortBitmap.decode(PortRange.parse("30000-32767"), raw).taken())
    finally:
        second.stop()
        chain.kubectl("delete", "namespace", ns, "--wait=false", check=False)
