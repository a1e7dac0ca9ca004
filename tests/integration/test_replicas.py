"""Two replicas of every service on one etcd behave as one cluster (issue 5, last bullet).

A chain of its own (``Chain(replicas=2)``): two core-api, two extensions-api and two gateways.
Writes through one gateway are read and watched through the other; a CRD created through one
gateway is served by both extensions-api replicas within a second; discovery merged from both
replicas' streams lists every group once; a CRD deleted with both CRD controllers running is
cleaned up once. Then the failures: a gateway started while one of a member's replicas is down
serves from the other and picks the late one up; a SIGSTOPped (hung) replica stops getting
requests once the gateways' keepalive pings go unanswered; SIGKILL of one core-api (the
controller leader) and one extensions-api replica while GETs run through both gateways: no GET
fails, the leader moves, a CRD created afterwards is served; SIGKILL of the gateway leading the
APIService controllers: the other keeps serving and takes over auto-registration without
rewriting the status of existing APIServices. ``kubechain up --replicas 2`` and bad counts last.
The tests run in file order and the later ones kill processes, so they share state on purpose.
"""

from __future__ import annotations

import collections
import functools
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.coreapi_procs import backend_request, etcd_keys
from support.freeze import freeze, thaw
from support.gateways import GatewayClient, GatewayWatch, RequestLoop
from support.procs import kubectl_binary

from kubechain_cli.chain import Chain, free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
KCM_LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"
AGG_LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-aggregator"
APISERVICES = "/apis/apiregistration.k8s.io/v1/apiservices"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
#: Leases run 15 s (kube's default); a takeover after SIGKILL waits for expiry plus a retry.
TAKEOVER = 40.0


def wait_for(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"{what}: not within {timeout}s (last: {last!r})")


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    data = tmp_path_factory.mktemp("replicas")
    c = Chain(data, port=free_port(), bookmark_interval=1.0, watch_cache_size=200, replicas=2)
    try:
        c.start(timeout=90)
    except Exception:
        c.stop()
        for log in sorted((data / "logs").glob("*.log")):
            print(f"== {log.name}\n{log.read_text()[-4000:]}")
        raise
    yield c
    c.stop()


@pytest.fixture(scope="module")
def gateways(chain: Chain) -> Iterator[list[GatewayClient]]:
    clients = [GatewayClient(chain, url) for url in chain.server_urls]
    yield clients
    for client in clients:
        client.close()


def namespace(client: GatewayClient, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    status, body = client.json("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    assert status == 201, body
    return name


def crd_manifest(group: str, plural: str = "widgets", kind: str = "Widget") -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "properties": {"spec": {"type": "object",
                                                               "properties": {"size": {"type": "integer"}}}}}}}]}}


def metric_total(chain: Chain, url: str, resource: str) -> float:
    """The sum of ``apiserver_request_total`` for ``resource`` on one backend replica."""
    status, text = raw_get(url, "/metrics")
    assert status == 200
    pattern = re.compile(r'^apiserver_request_total\{([^}]*)\} (\S+)$')
    total = 0.0
    for line in text.splitlines():
        match = pattern.match(line)
        if match and f'resource="{resource}"' in match.group(1):
            total += float(match.group(2))
    return total


def raw_get(url: str, path: str) -> tuple[int, str]:
    """GET on a backend link (Unix socket) without decoding JSON."""
    import http.client
    import socket

    class Conn(http.client.HTTPConnection):
        def connect(self) -> None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(10)
            sock.connect(url.removeprefix("unix://"))
            self.sock = sock

    conn = Conn("localhost", timeout=10)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def group_names(client: GatewayClient) -> list[str]:
    """The groups of the legacy ``/apis`` list through one gateway."""
    return [g["name"] for g in client.json("GET", "/apis")[1]["groups"]]


def argv_of(chain: Chain, name: str) -> list[str]:
    """The command line a process of the chain was started with."""
    args = chain.processes[name].args
    assert isinstance(args, list)
    return [str(a) for a in args]


def takes_requests(chain: Chain, clients: list[GatewayClient], url: str, path: str, resource: str) -> bool:
    """Whether the backend replica at ``url`` serves some of 20 GETs of ``path`` (a ``resource``)
    sent through ``clients`` in turn (all of which must succeed)."""
    before = metric_total(chain, url, resource)
    for i in range(20):
        status, body = clients[i % len(clients)].json("GET", path)
        assert status == 200, body
    return metric_total(chain, url, resource) - before >= 4


def serves(url: str, path: str) -> bool:
    try:
        status, _ = backend_request(url, "GET", path, timeout=5)
    except OSError:
        return False
    return status == 200


def manager_identity(chain: Chain, name: str) -> str:
    log = (chain.data_dir / "logs" / f"{name}.log").read_text(errors="replace")
    found = re.findall(r"controller manager (\S+) started", log)
    assert found, f"no controller manager identity in {name}'s log"
    return found[-1]


def aggregator_identity(chain: Chain, name: str) -> str | None:
    log = (chain.data_dir / "logs" / f"{name}.log").read_text(errors="replace")
    found = re.findall(r"(\S+) acquired lease kube-system/kube-aggregator", log)
    return found[-1] if found else None


# -- the shape of the chain ------------------------------------------------------------------
def test_every_service_runs_as_two_processes(chain: Chain, gateways: list[GatewayClient]) -> None:
    assert sorted(n for n in chain.processes if n != "etcd") == [
        "aggregator", "aggregator-1", "core-api", "core-api-1", "extensions-api", "extensions-api-1"]
    assert len(set(chain.server_urls)) == 2 and chain.server_urls[0] == chain.server_url
    assert f"server: {chain.server_url}" in chain.kubeconfig.read_text()
    for service in ("core-api", "extensions-api"):
        urls = chain.replica_urls[service]
        assert len(urls) == 2 and len(set(urls)) == 2 and chain.backend_urls[service] == urls[0]
        assert len(set(chain.replica_grpc[service])) == 2
    for name in ("aggregator", "aggregator-1"):
        argv = argv_of(chain, name)
        members = [argv[i + 1] for i, a in enumerate(argv) if a == "--member"]
        assert members == [",".join(chain.replica_urls["core-api"]), ",".join(chain.replica_urls["extensions-api"])]
    for name in ("core-api", "core-api-1"):  # each core-api delegates to both extensions-api replicas
        argv = argv_of(chain, name)
        delegates = [argv[i + 1] for i, a in enumerate(argv) if a == "--delegate-url"]
        assert delegates == chain.replica_urls["extensions-api"]
    for client in gateways:
        status, _ = client.request("GET", "/readyz")
        assert status == 200


def test_gateways_balance_across_backend_replicas(chain: Chain, gateways: list[GatewayClient]) -> None:
    ns = namespace(gateways[0], "balance")
    for service, path, resource in (("core-api", f"/api/v1/namespaces/{ns}/configmaps", "configmaps"),
                                    ("extensions-api", CRDS, "customresourcedefinitions")):
        for url in chain.replica_urls[service]:
            wait_for(functools.partial(takes_requests, chain, gateways, url, path, resource), 10,
                     f"{url} taking its share of {path}", interval=0.2)


# -- one cluster through either gateway -------------------------------------------------------
def test_write_through_one_gateway_read_and_watch_through_the_other(
        chain: Chain, gateways: list[GatewayClient]) -> None:
    a, b = gateways
    ns = namespace(a, "rw")
    path = f"/api/v1/namespaces/{ns}/configmaps"
    watch_b = GatewayWatch(chain, b.url, f"{path}?watch=1").start()
    watch_a = GatewayWatch(chain, a.url, f"{path}?watch=1").start()
    try:
        status, created = a.json("POST", path, {"metadata": {"name": "one"}, "data": {"k": "a"}})
        assert status == 201, created
        added = watch_b.wait_for(lambda e: e["type"] == "ADDED" and e["object"]["metadata"]["name"] == "one", 5)
        assert added["object"]["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
        status, read = b.json("GET", f"{path}/one")
        assert status == 200 and read["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
        status, updated = b.json("PUT", f"{path}/one", {**read, "data": {"k": "b"}})
        assert status == 200, updated
        modified = watch_a.wait_for(lambda e: e["type"] == "MODIFIED", 5)
        assert modified["object"]["data"] == {"k": "b"}
        # Optimistic concurrency holds across gateways: the old resourceVersion conflicts.
        status, conflict = a.json("PUT", f"{path}/one", {**read, "data": {"k": "c"}})
        assert status == 409 and conflict["reason"] == "Conflict", conflict
        # A list through A at B's write's resourceVersion has it (one etcd, consistent reads).
        status, listed = a.json("GET", f"{path}?resourceVersion={updated['metadata']['resourceVersion']}"
                                       "&resourceVersionMatch=NotOlderThan")
        assert status == 200 and [i["data"] for i in listed["items"] if i["metadata"]["name"] == "one"] == [{"k": "b"}]
        status, _ = b.json("DELETE", f"{path}/one")
        assert status == 200
        watch_a.wait_for(lambda e: e["type"] == "DELETED", 5)
        watch_b.wait_for(lambda e: e["type"] == "DELETED", 5)
        assert a.json("GET", f"{path}/one")[0] == 404
    finally:
        watch_a.close()
        watch_b.close()


def test_crd_created_through_one_gateway_is_served_by_both_replicas_within_a_second(
        chain: Chain, gateways: list[GatewayClient]) -> None:
    a, b = gateways
    group = f"r{uuid.uuid4().hex[:6]}.example.com"
    status, body = a.json("POST", CRDS, crd_manifest(group))
    assert status == 201, body
    created = time.monotonic()
    direct = f"/apis/{group}/v1/widgets"
    seen: dict[str, float] = {}
    while len(seen) < 4 and time.monotonic() - created < 5:
        for i, url in enumerate(chain.replica_urls["extensions-api"]):
            if f"replica {i}" not in seen and serves(url, direct):
                seen[f"replica {i}"] = time.monotonic() - created
        for i, client in enumerate(gateways):
            cr_list = f"/apis/{group}/v1/namespaces/default/widgets"
            if f"gateway {i}" not in seen and client.json("GET", cr_list)[0] == 200:
                seen[f"gateway {i}"] = time.monotonic() - created
        time.sleep(0.01)
    print(f"CRD served after (s): { {k: round(v, 3) for k, v in seen.items()} }")
    assert len(seen) == 4 and max(seen.values()) < 1.0, seen
    # A custom resource written through B is read and watched through A; every request after
    # the CRD is established succeeds, whichever replica takes it.
    ns = namespace(a, "cr")
    path = f"/apis/{group}/v1/namespaces/{ns}/widgets"
    watch = GatewayWatch(chain, a.url, f"{path}?watch=1").start()
    try:
        status, cr = b.json("POST", path, {"apiVersion": f"{group}/v1", "kind": "Widget",
                                           "metadata": {"name": "w1"}, "spec": {"size": 3}})
        assert status == 201, cr
        watch.wait_for(lambda e: e["type"] == "ADDED" and e["object"]["metadata"]["name"] == "w1", 5)
        for i in range(20):
            status, got = gateways[i % 2].json("GET", f"{path}/w1")
            assert status == 200 and got["spec"] == {"size": 3}, got
        # Schema validation is the same on both replicas.
        for client in gateways:
            status, bad = client.json("POST", path, {"apiVersion": f"{group}/v1", "kind": "Widget",
                                                     "metadata": {"name": "bad"}, "spec": {"size": "x"}})
            assert status == 422 and bad["details"]["causes"][0]["field"] == "spec.size", bad
    finally:
        watch.close()
    # The CRD's APIService is registered once (the leader gateway's autoregister).
    registered = wait_for(lambda: a.json("GET", f"{APISERVICES}/v1.{group}")[0] == 200, 10, "v1.<group> APIService")
    assert registered


def test_discovery_lists_every_group_once_through_both_gateways(
        chain: Chain, gateways: list[GatewayClient]) -> None:
    group = f"d{uuid.uuid4().hex[:6]}.example.com"
    status, body = gateways[1].json("POST", CRDS, crd_manifest(group, "gadgets", "Gadget"))
    assert status == 201, body
    seen_groups: list[list[str]] = []
    for client in gateways:
        def listed(c: GatewayClient = client) -> list[str] | None:
            names = [i["metadata"]["name"] for i in c.json("GET", "/apis", headers={"Accept": AGGREGATED})[1]["items"]]
            return names if group in names else None
        names = wait_for(listed, 5, f"{group} in aggregated discovery via {client.url}")
        duplicates = [n for n, k in collections.Counter(names).items() if k > 1]
        assert not duplicates, duplicates
        legacy = [g["name"] for g in client.json("GET", "/apis")[1]["groups"]]
        assert collections.Counter(legacy) == collections.Counter(names)
        assert {"apps", "apiextensions.k8s.io", "apiregistration.k8s.io", group} <= set(names)
        seen_groups.append(sorted(names))
        # The gateway spreads requests over both extensions-api replicas, and each serves the group
        # once its own informer has the CRD (one kube-apiserver of an HA pair behind a load balancer
        # too): the merged discovery may list it while one replica still answers 404.
        def group_versions(c: GatewayClient = client) -> list[str] | None:
            docs = [c.json("GET", f"/apis/{group}") for _ in range(4)]
            if any(status != 200 for status, _doc in docs):
                return None
            return [v["version"] for v in docs[-1][1]["versions"]]
        assert wait_for(group_versions, 10, f"/apis/{group} via {client.url}") == ["v1"]
    assert seen_groups[0] == seen_groups[1]
    # kubectl through the second gateway sees the CRD's resource once.
    out = kubectl(chain, "--server", chain.server_urls[1], "api-resources", f"--api-group={group}", "-o", "name")
    assert out.split() == [f"gadgets.{group}"]


def test_crd_deletion_with_both_controllers_removes_everything_once(
        chain: Chain, gateways: list[GatewayClient]) -> None:
    a, b = gateways
    group = f"x{uuid.uuid4().hex[:6]}.example.com"
    status, body = a.json("POST", CRDS, crd_manifest(group, "things", "Thing"))
    assert status == 201, body
    ns = namespace(a, "crdel")
    path = f"/apis/{group}/v1/namespaces/{ns}/things"
    # Each gateway spreads requests over both extensions-api replicas, and each replica serves the
    # CRD once its own informer has it (as each kube-apiserver of an HA pair does): wait until a run
    # of GETs through both gateways all succeed, so both replicas serve it.
    wait_for(lambda: all(g.json("GET", path)[0] == 200 for _ in range(8) for g in gateways), 20, "things served")
    for i in range(6):
        status, body = gateways[i % 2].json("POST", path, {"apiVersion": f"{group}/v1", "kind": "Thing",
                                                          "metadata": {"name": f"t{i}"}})
        assert status == 201, body
    status, body = b.json("DELETE", f"{CRDS}/things.{group}")
    assert status == 200, body
    wait_for(lambda: a.json("GET", f"{CRDS}/things.{group}")[0] == 404, 20, "the CRD gone")
    assert [k for k in etcd_keys(chain.etcd_endpoints, f"{chain.etcd_prefix}/{group}/") if "/things/" in k] == []
    for url in chain.replica_urls["extensions-api"]:
        wait_for(functools.partial(lambda u: not serves(u, f"/apis/{group}/v1/things"), url), 5,
                 f"{url} stops serving things")
    for client in gateways:
        wait_for(functools.partial(lambda c: group not in group_names(c), client), 5, "the group leaves discovery")
    # Neither replica logged a failed cleanup (both ran the finalizer; conflicts are expected, failures not).
    for name in ("extensions-api", "extensions-api-1"):
        log = (chain.data_dir / "logs" / f"{name}.log").read_text(errors="replace")
        assert f"cleaning up CRD things.{group} failed" not in log
        assert not re.search(rf"reconciling CRD things\.{re.escape(group)} failed", log)


# -- a replica that is down when a gateway starts ---------------------------------------------
def test_gateway_started_with_a_replica_down_serves_and_picks_it_up_later(
        chain: Chain, gateways: list[GatewayClient]) -> None:
    run = Path(chain.replica_urls["core-api"][0].removeprefix("unix://")).parent
    late_sock, late_grpc = run / "core-api-2.sock", run / "core-api-2.grpc.sock"
    core = [*chain.replica_urls["core-api"], f"unix://{late_sock}"]
    core_grpc = [*chain.replica_grpc["core-api"], f"unix://{late_grpc}"]
    argv = argv_of(chain, "aggregator-1")
    port = free_port()
    argv[argv.index("--secure-port") + 1] = str(port)
    members = [i for i, a in enumerate(argv) if a == "--member"]
    argv[members[0] + 1] = ",".join(core)
    grpcs = [i for i, a in enumerate(argv) if a == "--member-grpc"]
    argv[grpcs[0] + 1] = "core-api=" + ",".join(core_grpc)
    gateway = chain.add_process("aggregator-2", argv)
    url = f"https://127.0.0.1:{port}"
    client = GatewayClient(chain, url)
    try:
        wait_for(lambda: _ready(client), 30, "the third gateway ready with a core-api replica down")
        ns = namespace(client, "late")
        failures = sum(client.json("GET", f"/api/v1/namespaces/{ns}/configmaps")[0] != 200 for _ in range(30))
        assert failures == 0
        # The late replica starts: the gateway's control stream finds it and requests reach it.
        core_argv = argv_of(chain, "core-api-1")
        core_argv[core_argv.index("--bind-unix-socket") + 1] = str(late_sock)
        core_argv[core_argv.index("--grpc-bind-unix-socket") + 1] = str(late_grpc)
        late = chain.add_process("core-api-2", core_argv)
        late_url = f"unix://{late_sock}"
        wait_for(lambda: late_sock.exists() and serves(late_url, "/api/v1/namespaces"), 60, "the late replica up")
        # Once its health stream says SERVING (within the control channel's 2 s reconnect backoff).
        path = f"/api/v1/namespaces/{ns}/configmaps"
        wait_for(lambda: takes_requests(chain, [client], late_url, path, "configmaps"), 10,
                 "the late replica taking requests", interval=0.2)
        late.send_signal(signal.SIGTERM)
        late.wait(20)
    finally:
        client.close()
        gateway.send_signal(signal.SIGTERM)
        gateway.wait(20)


def _ready(client: GatewayClient) -> bool:
    try:
        return client.request("GET", "/readyz")[0] == 200
    except OSError:
        return False


# -- a replica that hangs ------------------------------------------------------------------------
def test_hung_replica_is_skipped_once_its_health_stream_times_out(
        chain: Chain, gateways: list[GatewayClient]) -> None:
    holder = wait_for(lambda: gateways[0].json("GET", KCM_LEASE)[1]["spec"].get("holderIdentity"), 20, "a leader")
    name = next(n for n in ("core-api", "core-api-1") if manager_identity(chain, n) != holder)
    url = chain.replica_urls["core-api"][int(name == "core-api-1")]
    proc = chain.processes[name]
    probes = [GatewayClient(chain, u, timeout=3) for u in chain.server_urls]

    def all_answer() -> bool:
        for client in probes:
            for _ in range(10):
                try:
                    if client.request("GET", "/api/v1/namespaces/default")[0] != 200:
                        return False
                except OSError:
                    return False
        return True

    freeze(proc.pid)  # every thread stopped, not just the signal queued (support/freeze.py)
    stopped = time.monotonic()
    try:
        # The gateways' keepalive pings go unanswered: the replica turns not serving and gets
        # no new requests (only those already sent to it wait).
        wait_for(all_answer, 40, f"requests through both gateways with {name} stopped", interval=0.5)
        print(f"{name} SIGSTOPped: both gateways route around it after {time.monotonic() - stopped:.1f}s")
        for client in probes:
            assert client.request("GET", "/readyz")[0] == 200
    finally:
        thaw(proc.pid)
        for client in probes:
            client.close()
    # Back: it turns serving again and takes requests through each gateway.
    for client in gateways:
        wait_for(functools.partial(takes_requests, chain, [client], url, "/api/v1/namespaces/default", "namespaces"),
                 20, f"{name} taking requests through {client.url} again", interval=0.2)


# -- SIGKILL one replica of each backend --------------------------------------------------------
def test_backend_replicas_killed_requests_keep_succeeding_and_controllers_move(
        chain: Chain, gateways: list[GatewayClient]) -> None:
    a, b = gateways
    group = f"k{uuid.uuid4().hex[:6]}.example.com"
    assert a.json("POST", CRDS, crd_manifest(group))[0] == 201
    ns = namespace(a, "kill")
    cr_path = f"/apis/{group}/v1/namespaces/{ns}/widgets"
    wait_for(lambda: a.json("GET", cr_path)[0] == 200 and b.json("GET", cr_path)[0] == 200, 5, "widgets served")
    holder = wait_for(lambda: a.json("GET", KCM_LEASE)[1]["spec"].get("holderIdentity"), 20, "a controller leader")
    ids = {name: manager_identity(chain, name) for name in ("core-api", "core-api-1")}
    leader = next(name for name, ident in ids.items() if ident == holder)
    survivor = next(name for name in ids if name != leader)
    loops = [RequestLoop(chain, url, path).start() for url in chain.server_urls
             for path in (f"/api/v1/namespaces/{ns}/configmaps", cr_path, "/api/v1/namespaces/default")]
    try:
        time.sleep(1.0)
        killed_at = time.monotonic()
        for name in (leader, "extensions-api"):
            chain.processes[name].send_signal(signal.SIGKILL)
            chain.processes[name].wait(10)
        time.sleep(3.0)
    finally:
        for loop in loops:
            loop.stop()
    failed = [(loop.url, loop.path, f.status, f.detail[:200]) for loop in loops for f in loop.failures(killed_at)]
    after = sum(loop.count(killed_at) for loop in loops)
    print(f"GETs through both gateways in the 3 s after SIGKILL of {leader} and extensions-api: "
          f"{after}, failed: {len(failed)}")
    assert all(loop.count(killed_at) > 20 for loop in loops), [loop.count(killed_at) for loop in loops]
    assert failed == []
    # Writes go on too (each one through the surviving replicas).
    for i in range(10):
        status, body = gateways[i % 2].json("POST", f"/api/v1/namespaces/{ns}/configmaps",
                                            {"metadata": {"name": f"after-{i}"}})
        assert status == 201, body
        status, body = gateways[i % 2].json("POST", cr_path, {"apiVersion": f"{group}/v1", "kind": "Widget",
                                                              "metadata": {"name": f"after-{i}"}})
        assert status == 201, body
    for client in gateways:
        assert client.request("GET", "/readyz")[0] == 200
    # The surviving core-api takes the controller lease and its controllers run.
    wait_for(lambda: a.json("GET", KCM_LEASE)[1]["spec"].get("holderIdentity") == ids[survivor], TAKEOVER,
             f"{survivor} leading the controllers", interval=0.5)
    moved = namespace(b, "moved")
    wait_for(lambda: b.json("GET", f"/api/v1/namespaces/{moved}/serviceaccounts/default")[0] == 200, 10,
             "the default ServiceAccount from the new leader")
    # A CRD created after the kill is served (by the surviving extensions-api) through both gateways.
    late_group = f"l{uuid.uuid4().hex[:6]}.example.com"
    assert b.json("POST", CRDS, crd_manifest(late_group))[0] == 201
    started = time.monotonic()
    for client in gateways:
        wait_for(functools.partial(lambda c: c.json("GET", f"/apis/{late_group}/v1/namespaces/{ns}/widgets")[0] == 200,
                                   client), 1.0, f"the new CRD through {client.url}", interval=0.01)
    print(f"CRD created after the kill served through both gateways in {time.monotonic() - started:.3f}s")
    status, condition = a.json("GET", f"{CRDS}/widgets.{late_group}")
    assert any(c["type"] == "Established" and c["status"] == "True" for c in condition["status"]["conditions"])


# -- SIGKILL one gateway ---------------------------------------------------------------------
def test_gateway_killed_the_other_serves_and_takes_over_apiservices(
        chain: Chain, gateways: list[GatewayClient]) -> None:
    holder = wait_for(lambda: gateways[0].json("GET", AGG_LEASE)[1]["spec"].get("holderIdentity"), 20,
                      "an APIService controller leader")
    names = ["aggregator", "aggregator-1"]
    leader = next((n for n in names if aggregator_identity(chain, n) == holder), None)
    assert leader is not None, f"no gateway log names {holder}"
    survivor_index = 1 - names.index(leader)
    survivor = gateways[survivor_index]
    _status, listed = survivor.json("GET", APISERVICES)
    watch = GatewayWatch(chain, survivor.url,
                         f"{APISERVICES}?watch=1&resourceVersion={listed['metadata']['resourceVersion']}").start()
    loop = RequestLoop(chain, survivor.url, "/api/v1/namespaces/default").start()
    try:
        time.sleep(0.5)
        killed_at = time.monotonic()
        chain.processes[leader].send_signal(signal.SIGKILL)
        chain.processes[leader].wait(10)
        time.sleep(2.0)
    finally:
        loop.stop()
    print(f"GETs through the surviving gateway in 2 s after the other's SIGKILL: {loop.count(killed_at)}, "
          f"failed: {len(loop.failures(killed_at))}")
    assert loop.count(killed_at) > 20 and loop.failures(killed_at) == []
    with pytest.raises(OSError):
        gateways[1 - survivor_index].request("GET", "/readyz")
    # The survivor takes the lease; its autoregister registers a new CRD's group-version.
    wait_for(lambda: survivor.json("GET", AGG_LEASE)[1]["spec"].get("holderIdentity") not in (None, holder),
             TAKEOVER, "the surviving gateway leading", interval=0.5)
    group = f"g{uuid.uuid4().hex[:6]}.example.com"
    assert survivor.json("POST", CRDS, crd_manifest(group))[0] == 201
    wait_for(lambda: survivor.json("GET", f"{APISERVICES}/v1.{group}")[0] == 200, 10, "v1.<group> registered")
    watch.wait_for(lambda e: e["type"] == "ADDED" and e["object"]["metadata"]["name"] == f"v1.{group}", 5)
    watch.close()
    # The new leader found every existing APIService as it should be: no status rewritten.
    changed = [e["object"]["metadata"]["name"] for e in watch.events
               if e["type"] == "MODIFIED" and e["object"]["metadata"]["name"] != f"v1.{group}"]
    assert changed == [], changed
    assert kubectl(chain, "--server", survivor.url, "get", "apiservice", f"v1.{group}", "-o", "name").strip() == \
        f"apiservice.apiregistration.k8s.io/v1.{group}"
    # The control streams stayed up all along (the backends accept the gateway's keepalive pings).
    for name in names:
        assert "too_many_pings" not in (chain.data_dir / "logs" / f"{name}.log").read_text(errors="replace")


# -- kubechain up --replicas ---------------------------------------------------------------------
def test_kubechain_up_with_two_replicas_survives_one_replica_and_stops_all(tmp_path: Path) -> None:
    data = tmp_path / "kc"
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kubechain_cli", "up", "--data-dir", str(data), "--port", str(port),
                             "--replicas", "2"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not any(ln.startswith("Stop with") for ln in lines):
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.strip())
        assert lines and lines[0].startswith(f"kubechain is ready at https://127.0.0.1:{port} ("), lines
        found = re.search(r"2 replicas of each service; gateways at (https://127.0.0.1:\d+), (https://127.0.0.1:(\d+))",
                          "\n".join(lines))
        assert found and found.group(1) == f"https://127.0.0.1:{port}", lines
        children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(proc.pid)], capture_output=True,
                                  text=True).stdout.split()
        assert len(children) == 7  # etcd + two of core-api, extensions-api, gateway
        # One replica dying does not stop the chain: the other serves on (through either gateway).
        replica = next(int(pid) for pid in children
                       if "core-api-1.sock" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"))
        os.kill(replica, signal.SIGKILL)
        time.sleep(1.5)
        assert proc.poll() is None
        env = dict(os.environ, KUBECONFIG=str(data / "kubeconfig"))
        for server in (f"https://127.0.0.1:{port}", found.group(2)):
            got = subprocess.run([kubectl_binary(), "--server", server, "get", "namespace", "kube-system",
                                  "-o", "name"], env=env, capture_output=True, text=True, timeout=30)
            assert got.stdout.strip() == "namespace/kube-system", got.stderr
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
        rest = proc.stdout.read()
        assert "kubechain: core-api-1 exited with -9" in rest and "kubechain stopped" in rest, rest
        for child in children:
            assert not Path(f"/proc/{child}").exists() or "zombie" in Path(f"/proc/{child}/status").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# -- bad inputs --------------------------------------------------------------------------------
@pytest.mark.parametrize("value,message", [("0", "must be at least 1"), ("-2", "must be at least 1"),
                                           ("two", "expected a whole number")])
def test_replicas_below_one_rejected(tmp_path: Path, value: str, message: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "kubechain_cli", "up", "--data-dir", str(tmp_path / "d"),
                           "--replicas", value], capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert proc.returncode == 2
    assert "argument --replicas: invalid replica count" in proc.stderr and message in proc.stderr
    assert not (tmp_path / "d").exists()  # nothing was started


def test_chain_with_zero_replicas_raises_before_starting_anything(tmp_path: Path) -> None:
    c = Chain(tmp_path / "d", port=free_port(), replicas=0)
    with pytest.raises(ValueError, match="replicas must be at least 1, not 0"):
        c.start(timeout=5)
    assert c.processes == {}


def kubectl(chain: Chain, *args: str) -> str:
    env = dict(os.environ, KUBECONFIG=str(chain.kubeconfig))
    proc = subprocess.run([kubectl_binary(), *args], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout
