"""ClusterServiceView on a real etcd: core-api's keys, lookups for the resolver, change notices."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from genericapi.apimachinery.serviceresolver import SERVICE_NAME_LABEL, ServiceResolutionError, ServiceResolver
from genericapi.registry.serviceview import ClusterServiceView
from genericapi.storage.etcd import EtcdClient

pytestmark = pytest.mark.integration


@pytest.fixture
async def client(etcd_server) -> AsyncIterator[EtcdClient]:  # type: ignore[no-untyped-def]
    c = EtcdClient([etcd_server.endpoint])
    yield c
    await c.close()


def service(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"clusterIP": "None", "ports": [{"name": "https", "port": 443, "targetPort": 8443}]}}


def endpoint_slice(name: str, service_name: str, ip: str, ready: bool) -> dict[str, Any]:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
            "metadata": {"name": name, "namespace": "ns", "labels": {SERVICE_NAME_LABEL: service_name}},
            "endpoints": [{"addresses": [ip], "conditions": {"ready": ready}}],
            "ports": [{"name": "https", "port": 8443}]}


async def until(check: Any, within: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


async def test_view_follows_services_and_slices(client: EtcdClient) -> None:
    prefix = f"/sv-{uuid.uuid4().hex[:8]}"
    await client.put(f"{prefix}/services/ns/api".encode(), orjson.dumps(service("api")))
    view = ClusterServiceView(client, prefix)
    changes: list[tuple[str, str, str]] = []
    view.subscribe(lambda resource, ns, name: changes.append((resource, ns, name)))
    await view.start()
    try:
        assert view.ready and view.service("ns", "api") is not None and view.service("ns", "nope") is None
        resolver = ServiceResolver(view)
        assert resolver.availability("ns", "api", 443) is not None  # no slices yet
        await client.put(f"{prefix}/endpointslices/ns/api-x".encode(),
                         orjson.dumps(endpoint_slice("api-x", "api", "10.1.0.9", True)))
        await client.put(f"{prefix}/endpointslices/ns/other-x".encode(),
                         orjson.dumps(endpoint_slice("other-x", "other", "10.1.0.8", True)))
        await until(lambda: len(view.endpoint_slices("ns", "api")) == 1)
        assert resolver.resolve("ns", "api", 443) == "https://10.1.0.9:8443"
        assert resolver.availability("ns", "api", 443) is None
        await until(lambda: ("endpointslices", "ns", "other") in changes)
        assert ("endpointslices", "ns", "api") in changes

        await client.put(f"{prefix}/endpointslices/ns/api-x".encode(),
                         orjson.dumps(endpoint_slice("api-x", "api", "10.1.0.9", False)))
        await until(lambda: view.endpoint_slices("ns", "api")[0]["endpoints"][0]["conditions"]["ready"] is False)
        with pytest.raises(ServiceResolutionError, match='no endpoints available for service "api"'):
            resolver.resolve("ns", "api", 443)

        revision = await client.put(f"{prefix}/services/ns/api".encode(), orjson.dumps(service("api")))
        await until(lambda: view.service("ns", "api") is not None
                    and view.service("ns", "api")["metadata"].get("resourceVersion") == str(revision))  # type: ignore[index]
        await client.delete_prefix(f"{prefix}/services/".encode())
        await until(lambda: view.service("ns", "api") is None)
        await until(lambda: changes.count(("services", "ns", "api")) >= 2)
    finally:
        await view.stop()
        await client.delete_prefix(f"{prefix}/".encode())
