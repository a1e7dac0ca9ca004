"""``default/kubernetes`` Endpoints and EndpointSlice from the gateways' master leases, against
the real chain and its etcd (kube's lease endpoint reconciler).

The chain's gateway keeps its lease; the test adds another gateway's lease with the same
``MasterLease`` class a gateway runs, stops it, and lets a third expire, and reads what core-api
made of them (kubectl 1.27 and 1.33 show the addresses).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from aggregator.masterlease import MasterLease
from support.procs import ChainHandle, kubectl_params

pytestmark = pytest.mark.integration

EP = "/api/v1/namespaces/default/endpoints/kubernetes"
SLICE = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes"


KUBECTLS = kubectl_params("1.27", "1.33")


def wait_for(fetch: Callable[[], Any], want: Callable[[Any], bool], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fetch()
        if want(last):
            return last
        time.sleep(0.2)
    raise AssertionError(f"not reached in {timeout}s; last: {last}")


def subsets(chain: ChainHandle) -> list[dict[str, Any]]:
    status, ep = chain.json("GET", EP)
    return list(ep.get("subsets") or []) if status == 200 else []


def https(port: int) -> list[dict[str, Any]]:
    return [{"name": "https", "port": port, "protocol": "TCP"}]


def test_endpoints_and_slice_of_the_kubernetes_service(chain: ChainHandle) -> None:
    port = chain.chain.port
    wait_for(lambda: subsets(chain), lambda s: s == [{"addresses": [{"ip": "127.0.0.1"}], "ports": https(port)}])
    _, ep = chain.json("GET", EP)
    assert ep["metadata"]["labels"] == {"endpointslice.kubernetes.io/skip-mirror": "true"}
    assert "annotations" not in ep["metadata"]
    assert [m["manager"] for m in ep["metadata"]["managedFields"]] == ["kube-apiserver"]
    _, eps = chain.json("GET", SLICE)
    assert eps["metadata"]["labels"] == {"kubernetes.io/service-name": "kubernetes"}
    assert {k: eps[k] for k in ("addressType", "endpoints", "ports")} == {
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
        "ports": https(port),
    }
    _, svc = chain.json("GET", "/api/v1/namespaces/default/services/kubernetes")
    assert svc["spec"]["ports"] == [{"name": "https", "protocol": "TCP", "port": 443, "targetPort": port}]


@pytest.mark.parametrize("version", KUBECTLS)
def test_kubectl_shows_the_gateway(chain: ChainHandle, version: str) -> None:
    port = chain.chain.port
    wait_for(lambda: subsets(chain), lambda s: bool(s))
    out = chain.kubectl("get", "endpoints", "kubernetes", "-n", "default", "--no-headers", version=version)
    assert out.stdout.split()[:2] == ["kubernetes", f"127.0.0.1:{port}"]
    out = chain.kubectl("get", "endpointslices", "-n", "default", "-l", "kubernetes.io/service-name=kubernetes",
                        "-o", "jsonpath={.items[*].metadata.name} {.items[*].endpoints[*].addresses[*]}",
                        version=version)
    assert out.stdout == "kubernetes 127.0.0.1"


def test_gateways_come_and_go_with_their_leases(chain: ChainHandle) -> None:
    port = chain.chain.port
    etcd = [chain.chain.etcd_endpoints]
    prefix = chain.chain.etcd_prefix
    mine = {"addresses": [{"ip": "127.0.0.1"}], "ports": https(port)}

    async def scenario() -> None:
        other = MasterLease(etcd, prefix, "127.0.0.2", port, etcd_tls=chain.chain.etcd_tls)
        await other.start()
        same_port = await asyncio.to_thread(wait_for, lambda: subsets(chain), lambda s: len(s[0]["addresses"]) == 2)
        assert same_port == [{"addresses": [{"ip": "127.0.0.1"}, {"ip": "127.0.0.2"}], "ports": https(port)}]
        _, eps = await asyncio.to_thread(chain.json, "GET", SLICE)
        assert [e["addresses"] for e in eps["endpoints"]] == [["127.0.0.1"], ["127.0.0.2"]]
        await other.stop()  # a graceful stop removes the lease at once
        await asyncio.to_thread(wait_for, lambda: subsets(chain), lambda s: s == [mine])

        elsewhere = MasterLease(etcd, prefix, "127.0.0.3", 7443, interval=3600, ttl=2,  # never renewed
                                etcd_tls=chain.chain.etcd_tls)
        await elsewhere.renew()
        got = await asyncio.to_thread(wait_for, lambda: subsets(chain), lambda s: len(s) == 2)
        assert got == [mine, {"addresses": [{"ip": "127.0.0.3"}], "ports": https(7443)}]
        _, eps = await asyncio.to_thread(chain.json, "GET", SLICE)
        assert eps["ports"] == https(port)  # the slice shows the first subset: the Service's targetPort
        await asyncio.to_thread(wait_for, lambda: subsets(chain), lambda s: s == [mine], 15.0)  # TTL ran out
        await elsewhere.etcd.close()

    asyncio.run(scenario())


def test_endpoints_are_put_back(chain: ChainHandle) -> None:
    """Someone deletes or edits them: the next pass (at most 10 s) restores kube's content."""
    port = chain.chain.port
    mine = [{"addresses": [{"ip": "127.0.0.1"}], "ports": https(port)}]
    wait_for(lambda: subsets(chain), lambda s: s == mine)
    _, ep = chain.json("GET", EP)
    ep["subsets"] = [{"addresses": [{"ip": "10.9.9.9"}], "ports": https(1)}]
    status, _ = chain.json("PUT", EP, ep)
    assert status == 200
    wait_for(lambda: subsets(chain), lambda s: s == mine, 15.0)
    status, _ = chain.json("DELETE", SLICE)
    assert status == 200
    wait_for(lambda: chain.json("GET", SLICE)[0], lambda code: code == 200, 15.0)
