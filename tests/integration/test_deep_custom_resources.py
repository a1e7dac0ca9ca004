"""Custom resources nested deeper than orjson serializes (254 levels) are served, not a 500.

A CRD whose spec has ``x-kubernetes-preserve-unknown-fields`` stores any JSON the decoder takes;
kube-apiserver then returns it from every verb. Before the encoders went through
``deepjson.dumps`` such an object was created in etcd but every answer carrying it was a 500.
Each verb is exercised at 300 levels and at kube's decoder limit (10,000), on one object per depth:
create, get, list, watch, JSON patch, merge patch, strategic merge patch (a 415 for custom resources,
as kube) and server-side apply, each read back; one level more is kube's 400 with Go's scanner text.
The documents are built, sent and read with ``deepjson`` (importing it gives this process the
recursion limit and stack that 10,000 levels need, as the services).
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from genericapi.apimachinery import deepjson
from support.procs import ChainHandle

pytestmark = pytest.mark.integration

GROUP = "deep.example.com"
NS = "deep-crs"
BASE = f"/apis/{GROUP}/v1/namespaces/{NS}/deeps"

CRD = f"""
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: deeps.{GROUP}
spec:
  group: {GROUP}
  scope: Namespaced
  names: {{plural: deeps, singular: deep, kind: Deep}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
"""


@pytest.fixture(scope="module")
def deep_crd(chain: ChainHandle) -> Iterator[None]:
    chain.kubectl("create", "namespace", NS)
    chain.kubectl("apply", "-f", "-", input=CRD)
    chain.kubectl("wait", "--for", "condition=Established", f"crd/deeps.{GROUP}", "--timeout=20s")
    yield
    chain.kubectl("delete", "namespace", NS, "--wait=false")
    chain.kubectl("delete", "crd", f"deeps.{GROUP}", "--wait=false")


def nested(levels: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


def depth(value: Any) -> int:
    """Nesting of a decoded document (an object or array is one level), iteratively."""
    best, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is not None:
            best = max(best, level)
            stack.extend((child, level + 1) for child in children)
    return best


def leaf(obj: dict[str, Any]) -> Any:
    node = obj["spec"]["x"]
    while isinstance(node, dict) and "a" in node:
        node = node["a"]
    return node


def deep_object(name: str, levels: int, value: Any) -> dict[str, Any]:
    """A Deep whose document nests exactly ``levels`` deep (root, spec and x take three)."""
    return {"apiVersion": f"{GROUP}/v1", "kind": "Deep", "metadata": {"name": name, "namespace": NS},
            "spec": {"x": nested(levels - 3, {"v": value})}}


def send(chain: ChainHandle, method: str, path: str, doc: Any = None,
         ctype: str = "application/json") -> tuple[int, Any]:
    raw = deepjson.dumps(doc) if doc is not None else None
    status, _h, body = chain.request(method, path, raw=raw, headers={"Content-Type": ctype} if raw else None)
    return status, deepjson.loads(body) if body else None


@pytest.mark.parametrize("levels", [300, deepjson.MAX_DEPTH])
def test_every_verb_serves_a_deep_custom_resource(chain: ChainHandle, deep_crd: None, levels: int) -> None:
    name = f"deep-{levels}"
    obj = deep_object(name, levels, "created")
    assert depth(obj) == levels

    status, body = send(chain, "POST", BASE, obj)
    assert status == 201, str(body)[:500]
    assert leaf(body) == {"v": "created"} and depth(body["spec"]) == levels - 1

    status, body = send(chain, "GET", f"{BASE}/{name}")
    assert status == 200, str(body)[:500]
    assert leaf(body) == {"v": "created"}
    rv = body["metadata"]["resourceVersion"]

    status, body = send(chain, "GET", BASE)
    assert status == 200, str(body)[:500]
    assert [leaf(item) for item in body["items"] if item["metadata"]["name"] == name] == [{"v": "created"}]

    # The watch replays the object from its resourceVersion (the watch cache's encoding too).
    status, _h, raw = chain.request("GET", f"{BASE}?watch=1&resourceVersion=0&fieldSelector=metadata.name%3D{name}"
                                    "&timeoutSeconds=2")
    assert status == 200, raw[:500]
    events = [deepjson.loads(line) for line in raw.splitlines() if line.strip()]
    assert [(e["type"], leaf(e["object"])) for e in events] == [("ADDED", {"v": "created"})], raw[:500]

    # A JSON patch at the deepest point (a shallow body).
    pointer = "/spec/x" + "/a" * (levels - 3) + "/v"
    status, body = send(chain, "PATCH", f"{BASE}/{name}", [{"op": "replace", "path": pointer, "value": "json"}],
                        "application/json-patch+json")
    assert status == 200, str(body)[:500]
    assert leaf(body) == {"v": "json"} and body["metadata"]["resourceVersion"] != rv

    # A merge patch as deep as the object.
    status, body = send(chain, "PATCH", f"{BASE}/{name}", {"spec": {"x": nested(levels - 3, {"v": "merge"})}},
                        "application/merge-patch+json")
    assert status == 200, str(body)[:500]
    assert leaf(body) == {"v": "merge"}

    # Custom resources take no strategic merge patch: kube's 415, not a 500.
    status, body = send(chain, "PATCH", f"{BASE}/{name}", {"spec": {"x": nested(levels - 3, {"v": "smp"})}},
                        "application/strategic-merge-patch+json")
    assert status == 415, str(body)[:500]

    # Server-side apply of the whole object, then read back.
    applied = deep_object(name, levels, "applied")
    status, body = send(chain, "PATCH", f"{BASE}/{name}?fieldManager=deep-test&force=true", applied,
                        "application/apply-patch+yaml")
    assert status == 200, str(body)[:500]
    assert leaf(body) == {"v": "applied"}
    assert any(m["manager"] == "deep-test" and m["operation"] == "Apply" for m in body["metadata"]["managedFields"])

    status, body = send(chain, "GET", f"{BASE}/{name}")
    assert status == 200 and leaf(body) == {"v": "applied"}

    status, body = send(chain, "DELETE", f"{BASE}/{name}")
    assert status == 200, str(body)[:500]


def test_a_deep_custom_resource_is_watched_as_it_changes(chain: ChainHandle, deep_crd: None) -> None:
    """A live watch (not a replay) carries the deep object on ADDED, MODIFIED and DELETED."""
    name = "deep-watched"
    status, body = send(chain, "GET", BASE)
    assert status == 200
    rv = body["metadata"]["resourceVersion"]
    req = urllib.request.Request(
        f"{chain.url}{BASE}?watch=1&resourceVersion={rv}&fieldSelector=metadata.name%3D{name}&timeoutSeconds=10")
    with urllib.request.urlopen(req, context=chain.ssl_context(), timeout=30) as stream:
        status, body = send(chain, "POST", BASE, deep_object(name, 600, "one"))
        assert status == 201, str(body)[:500]
        status, body = send(chain, "PATCH", f"{BASE}/{name}", [{"op": "add", "path": "/metadata/labels",
                                                                "value": {"k": "v"}}], "application/json-patch+json")
        assert status == 200, str(body)[:500]
        status, body = send(chain, "DELETE", f"{BASE}/{name}")
        assert status == 200, str(body)[:500]
        seen = []
        for line in stream:
            event = deepjson.loads(line)
            seen.append((event["type"], leaf(event["object"])))
            if event["type"] == "DELETED":
                break
    assert seen == [("ADDED", {"v": "one"}), ("MODIFIED", {"v": "one"}), ("DELETED", {"v": "one"})]


def test_one_level_past_kubes_limit_is_a_400_with_gos_scanner_text(chain: ChainHandle, deep_crd: None) -> None:
    """kube's decoder refuses a body nested 10,001 deep (sigs.k8s.io/json's scanner, ``maxNestingDepth``)."""
    too_deep = deepjson.MAX_DEPTH + 1
    status, _h, body = chain.request("POST", BASE, raw=deepjson.dumps(deep_object("too-deep", too_deep, "x")))
    assert status == 400, body[:500]
    assert b"json parse error: invalid character '{' exceeded max depth" in body, body[:500]
    status, got = send(chain, "GET", f"{BASE}/too-deep")
    assert status == 404, str(got)[:500]
    # A merge patch that deep is refused the same way, the object unchanged.
    status, got = send(chain, "POST", BASE, deep_object("patched-too-deep", 10, "kept"))
    assert status == 201, str(got)[:500]
    status, _h, body = chain.request("PATCH", f"{BASE}/patched-too-deep",
                                     raw=deepjson.dumps({"spec": {"x": nested(too_deep - 3, {"v": 1})}}),
                                     headers={"Content-Type": "application/merge-patch+json"})
    assert status == 400, body[:500]
    assert b"invalid character '{' exceeded max depth" in body, body[:500]
    status, got = send(chain, "GET", f"{BASE}/patched-too-deep")
    assert status == 200 and leaf(got) == {"v": "kept"}, str(got)[:500]
    send(chain, "DELETE", f"{BASE}/patched-too-deep")
