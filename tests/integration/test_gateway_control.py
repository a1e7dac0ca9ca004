"""The gateway learns routes and discovery from the members' gRPC control streams (no polling),
and merges ``/openapi/v2`` across members so old kubectls can ``explain`` a CRD."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from support.procs import ChainHandle

pytestmark = pytest.mark.integration

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
PROTO_V2 = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.{group}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: {plural}, singular: {singular}, kind: {kind}}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        description: A {kind} for the gateway tests.
        properties:
          spec:
            type: object
            description: What the {kind} wants.
            properties:
              speed: {{type: integer, description: "How fast it goes, in furlongs per fortnight."}}
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
"""


def crd(group: str, plural: str, kind: str) -> str:
    return CRD.format(group=group, plural=plural, singular=plural[:-1], kind=kind)


def create_established(chain: ChainHandle, manifest: str, name: str) -> float:
    """Create a CRD through the gateway; the time it became Established (as kubectl saw it)."""
    chain.kubectl("create", "-f", "-", input=manifest)
    chain.kubectl("wait", "--for", "condition=Established", f"crd/{name}", "--timeout=10s")
    return time.monotonic()


def groups_in(chain: ChainHandle, accept: str = "") -> dict[str, list[str]]:
    status, _h, body = chain.request("GET", "/apis", headers={"Accept": accept} if accept else None)
    assert status == 200
    doc = json.loads(body)
    if doc["kind"] == "APIGroupDiscoveryList":
        return {i["metadata"]["name"]: [v["version"] for v in i["versions"]] for i in doc["items"]}
    return {g["name"]: [v["version"] for v in g["versions"]] for g in doc["groups"]}


def test_crd_is_usable_with_kubectl_right_after_established(chain: ChainHandle) -> None:
    group, ns = "gwctl-fast.example.com", "gwctl-fast"
    chain.kubectl("create", "namespace", ns)
    # Warm kubectl's discovery cache first, so the new group is a cache miss kubectl must resolve.
    chain.kubectl("api-resources")
    # What the same two kubectl commands cost for a built-in kind right now (process start-up and
    # discovery dominate; a loaded machine slows both alike).
    started = time.monotonic()
    chain.kubectl("get", "configmaps", "-n", ns)
    chain.kubectl("api-resources", "--api-group=apps")
    baseline = time.monotonic() - started
    established = create_established(chain, crd(group, "rockets", "Rocket"), f"rockets.{group}")
    out = chain.kubectl("get", "rockets", "-n", ns)
    assert "No resources found" in out.stderr
    resources = chain.kubectl("api-resources", f"--api-group={group}").stdout
    elapsed = time.monotonic() - established
    assert any(line.split()[:1] == ["rockets"] for line in resources.splitlines()[1:]), resources
    print(f"CRD usable {elapsed:.3f}s after Established (kubectl get + api-resources; {baseline:.3f}s for apps)")
    assert elapsed < max(1.0, 3 * baseline), f"the CRD took {elapsed:.3f}s to be usable ({baseline:.3f}s for apps)"
    # A custom resource round-trips through the route the stream installed.
    chain.kubectl("create", "-n", ns, "-f", "-", input=json.dumps(
        {"apiVersion": f"{group}/v1", "kind": "Rocket", "metadata": {"name": "r1"}, "spec": {"speed": 3}}))
    assert chain.kubectl("get", "rockets", "r1", "-n", ns, "-o", "jsonpath={.spec.speed}").stdout == "3"


def test_discovery_follows_the_stream_both_ways(chain: ChainHandle) -> None:
    group = "gwctl-both.example.com"
    name = f"boats.{group}"
    assert group not in groups_in(chain)
    create_established(chain, crd(group, "boats", "Boat"), name)
    # Both forms of /apis list the group at once, versions in kube's priority order (v1 first).
    assert groups_in(chain)[group] == ["v1", "v1beta1"]
    assert groups_in(chain, AGGREGATED)[group] == ["v1", "v1beta1"]
    status, headers, _b = chain.request("GET", "/apis", headers={"Accept": AGGREGATED})
    assert headers["content-type"] == AGGREGATED
    legacy = json.loads(chain.request("GET", "/apis")[2])
    entry = next(g for g in legacy["groups"] if g["name"] == group)
    assert entry["preferredVersion"] == {"groupVersion": f"{group}/v1", "version": "v1"}
    # The built-ins and the gateway's own group are still there, the APIService group first.
    names = list(groups_in(chain, AGGREGATED))
    assert names[0] == "apiregistration.k8s.io" and "apps" in names
    # Aggregated /api comes from core-api's stream; the legacy one still lists v1.
    status, headers, body = chain.request("GET", "/api", headers={"Accept": AGGREGATED})
    assert status == 200 and headers["content-type"] == AGGREGATED
    assert [v["version"] for v in json.loads(body)["items"][0]["versions"]] == ["v1"]
    assert chain.json("GET", "/api")[1]["versions"] == ["v1"]

    chain.kubectl("delete", "crd", name, "--wait=true")
    deadline = time.monotonic() + 5
    while group in groups_in(chain, AGGREGATED) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group not in groups_in(chain, AGGREGATED)
    assert group not in groups_in(chain)
    status, body = chain.json("GET", f"/apis/{group}/v1/boats")
    assert status == 404


def test_gateway_is_ready_from_member_health(chain: ChainHandle) -> None:
    status, _h, body = chain.request("GET", "/readyz?verbose")
    assert status == 200, body
    assert b"backends ok" in body


def test_openapi_v2_merges_builtins_crds_and_apiservices(chain: ChainHandle) -> None:
    group = "gwctl-oapi.example.com"
    create_established(chain, crd(group, "kites", "Kite"), f"kites.{group}")
    status, headers, body = chain.request("GET", "/openapi/v2", headers={"Accept": "application/json"})
    assert status == 200 and headers["content-type"] == "application/json"
    doc = json.loads(body)
    assert doc["swagger"] == "2.0"
    assert "io.k8s.api.core.v1.Pod" in doc["definitions"]
    kite = next(v for k, v in doc["definitions"].items() if k.endswith(".Kite"))
    assert kite["x-kubernetes-group-version-kind"][0]["group"] == group
    assert any(p.startswith(f"/apis/{group}/v1/") for p in doc["paths"])
    assert "/api/v1/namespaces/{namespace}/pods" in doc["paths"]
    assert any(p.startswith("/apis/apiregistration.k8s.io/v1/") for p in doc["paths"])
    # Conditional requests and the protobuf form kubectl <= 1.28 asks for.
    etag = headers["etag"]
    assert chain.request("GET", "/openapi/v2", headers={"If-None-Match": etag})[0] == 304
    status, headers, proto = chain.request("GET", "/openapi/v2", headers={"Accept": PROTO_V2})
    assert status == 200 and headers["content-type"].startswith("application/com.github.proto-openapi.spec.v2")
    assert b"Kite" in proto and b"io.k8s.api.core.v1.Pod" in proto

    # kubectl 1.27 explains the CRD from the merged OpenAPI v2 (protobuf).
    out = chain.kubectl("explain", f"kites.{group}", version="1.27").stdout
    assert "KIND:" in out and "Kite" in out and "A Kite for the gateway tests." in out
    out = chain.kubectl("explain", f"kites.{group}.spec.speed", version="1.27").stdout
    assert "furlongs per fortnight" in out
    assert "containers" in chain.kubectl("explain", "pods.spec", version="1.28").stdout

    # Deleting the CRD bumps extensions-api's discovery generation: the merged document follows.
    chain.kubectl("delete", "crd", f"kites.{group}", "--wait=true")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        doc = json.loads(chain.request("GET", "/openapi/v2")[2])
        if not any(p.startswith(f"/apis/{group}/") for p in doc["paths"]):
            break
        time.sleep(0.05)
    assert not any(p.startswith(f"/apis/{group}/") for p in doc["paths"])
    assert not any(k.endswith(".Kite") for k in doc["definitions"])
    bad = chain.kubectl("explain", f"kites.{group}", version="1.27", check=False)
    assert bad.returncode != 0


@pytest.mark.parametrize(("args", "message"), [
    (["--member", "http://a", "--member-grpc", "core-api"], "expected NAME=ADDRESS"),
    (["--member", "http://a", "--member-grpc", "core-api=localhost"], "expected host:port or unix:///path"),
    (["--member", "http://a", "--member-grpc", "core-api=unix:relative.sock"], "must be absolute"),
    (["--member", "http://a", "--member", "http://b", "--member-grpc", "core-api=127.0.0.1:1"],
     "--member-grpc names 1 members but --member 2"),
])
def test_bad_control_flags_are_refused(args: list[str], message: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "aggregator", *args], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert message in proc.stderr
