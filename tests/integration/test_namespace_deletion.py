"""Namespace deletion on the real chain: kubectl delete ns, the controller, finalize, etcd left empty."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from support.coreapi_procs import etcd_keys as all_etcd_keys
from support.procs import ChainHandle

from kubechain_cli.chain import Chain

pytestmark = pytest.mark.integration


def etcd_keys(chain: Chain, needle: str) -> list[str]:
    """Keys under the chain's prefix containing ``needle``, read from etcd itself."""
    return [k for k in all_etcd_keys(chain.etcd_endpoints, chain.etcd_prefix + "/") if needle in k]


def wait_gone(chain: ChainHandle, path: str, timeout: float = 20) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        status, _ = chain.json("GET", path)
        if status == 404:
            return time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError(f"{path} still there after {timeout}s: {chain.json('GET', path)}")


def create_ns(chain: ChainHandle, name: str) -> dict[str, Any]:
    status, ns = chain.json("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    assert status == 201, ns
    return ns  # type: ignore[no-any-return]


POD: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                       "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}


def test_kubectl_delete_ns_leaves_nothing_in_etcd(chain: ChainHandle) -> None:
    ns = create_ns(chain, "nsdel-kubectl")
    assert ns["spec"]["finalizers"] == ["kubernetes"]
    assert ns["status"]["phase"] == "Active"
    chain.kubectl("-n", "nsdel-kubectl", "create", "configmap", "settings", "--from-literal=a=b")
    chain.kubectl("-n", "nsdel-kubectl", "create", "secret", "generic", "pw", "--from-literal=p=q")
    chain.kubectl("-n", "nsdel-kubectl", "create", "deployment", "web", "--image=nginx:1.25")
    chain.kubectl("-n", "nsdel-kubectl", "create", "service", "clusterip", "web", "--tcp=80:80")
    status, _ = chain.json("POST", "/api/v1/namespaces/nsdel-kubectl/pods", {**POD, "metadata": {"name": "p"}})
    assert status == 201
    # A pod bound to a node that does not exist: no kubelet will ever confirm it stopped.
    status, _ = chain.json("POST", "/api/v1/namespaces/nsdel-kubectl/pods",
                           {**POD, "metadata": {"name": "bound"}, "spec": {**POD["spec"], "nodeName": "gone-node"}})
    assert status == 201
    assert etcd_keys(chain.chain, "/nsdel-kubectl/")
    out = chain.kubectl("delete", "namespace", "nsdel-kubectl", timeout=60)
    assert 'namespace "nsdel-kubectl" deleted' in out.stdout
    got = chain.kubectl("get", "namespace", "nsdel-kubectl", check=False)
    assert got.returncode != 0 and "NotFound" in got.stderr
    assert etcd_keys(chain.chain, "/nsdel-kubectl") == []


def test_terminating_namespace_conditions_and_finalizers(chain: ChainHandle) -> None:
    name = "nsdel-held"
    create_ns(chain, name)
    held = {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
    status, _ = chain.json("POST", f"/api/v1/namespaces/{name}/configmaps", held)
    assert status == 201
    status, out = chain.json("DELETE", f"/api/v1/namespaces/{name}")
    assert status == 200, out
    assert out["kind"] == "Namespace" and out["status"]["phase"] == "Terminating"
    assert out["metadata"]["deletionTimestamp"] and out["spec"]["finalizers"] == ["kubernetes"]
    # Creating content in a terminating namespace: 403 with NamespaceLifecycle's message and cause.
    status, err = chain.json("POST", f"/api/v1/namespaces/{name}/configmaps", {"metadata": {"name": "late"}})
    assert status == 403, err
    assert err["reason"] == "Forbidden"
    assert err["message"] == (f'configmaps "late" is forbidden: unable to create new content in namespace {name} '
                              "because it is being terminated")
    assert err["details"]["causes"] == [{"reason": "NamespaceTerminating", "field": "metadata.namespace",
                                         "message": f"namespace {name} is being terminated"}]
    # The controller reports what holds the namespace.
    deadline = time.monotonic() + 10
    conditions: dict[str, Any] = {}
    while time.monotonic() < deadline:
        _s, ns = chain.json("GET", f"/api/v1/namespaces/{name}")
        conditions = {c["type"]: c for c in ns["status"].get("conditions", [])}
        if conditions.get("NamespaceFinalizersRemaining", {}).get("status") == "True":
            break
        time.sleep(0.1)
    assert conditions["NamespaceContentRemaining"]["reason"] == "SomeResourcesRemain"
    assert conditions["NamespaceContentRemaining"]["message"] == \
        "Some resources are remaining: configmaps. has 1 resource instances"
    assert conditions["NamespaceFinalizersRemaining"]["reason"] == "SomeFinalizerRemain"
    assert conditions["NamespaceFinalizersRemaining"]["message"] == \
        "Some finalizers are remaining: example.com/hold in 1 resource instances"
    assert conditions["NamespaceDeletionDiscoveryFailure"]["status"] == "False"
    assert conditions["NamespaceDeletionDiscoveryFailure"]["reason"] == "ResourcesDiscovered"
    assert conditions["NamespaceDeletionContentFailure"]["reason"] == "ContentDeleted"
    assert conditions["NamespaceDeletionGroupVersionParsingFailure"]["reason"] == "ParsedGroupVersions"
    # A second DELETE answers the namespace again (still terminating).
    status, again = chain.json("DELETE", f"/api/v1/namespaces/{name}")
    assert status == 200 and again["status"]["phase"] == "Terminating"
    # Releasing the finalizer lets the namespace go.
    status, _ = chain.json("PATCH", f"/api/v1/namespaces/{name}/configmaps/held",
                           {"metadata": {"finalizers": None}},
                           headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200
    wait_gone(chain, f"/api/v1/namespaces/{name}")
    assert etcd_keys(chain.chain, f"/{name}") == []


def test_finalize_subresource(chain: ChainHandle) -> None:
    name = "nsdel-finalize"
    ns = create_ns(chain, name)
    path = f"/api/v1/namespaces/{name}/finalize"
    # A plain update cannot change spec.finalizers; only finalize can.
    body = json.loads(json.dumps(ns))
    body["spec"]["finalizers"] = []
    status, out = chain.json("PUT", f"/api/v1/namespaces/{name}", body)
    assert status == 200 and out["spec"]["finalizers"] == ["kubernetes"]
    # Bad bodies.
    bad = json.loads(json.dumps(ns))
    bad["spec"]["finalizers"] = ["kubernetes", "foo"]
    status, err = chain.json("PUT", path, bad)
    assert status == 422, err
    assert err["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "spec.finalizers[1]",
                                         "message": 'Invalid value: "foo": name is neither a standard finalizer '
                                                    "name nor is it fully qualified"}]
    other = json.loads(json.dumps(ns))
    other["metadata"]["name"] = "someone-else"
    status, err = chain.json("PUT", path, other)
    assert status == 400, err
    status, err = chain.json("PUT", path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
    assert status == 400, err
    status, err = chain.json("GET", path)
    assert status == 405, err
    status, err = chain.json("PUT", "/api/v1/namespaces/no-such-ns/finalize",
                             {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "no-such-ns"}})
    assert status == 404, err
    # finalize keeps status and may empty spec.finalizers.
    good = json.loads(json.dumps(ns))
    good["spec"]["finalizers"] = ["example.com/x"]
    good["status"] = {"phase": "Terminating"}
    status, out = chain.json("PUT", path, good)
    assert status == 200, out
    assert out["spec"]["finalizers"] == ["example.com/x"] and out["status"]["phase"] == "Active"
    # Deleted with a foreign finalizer only: marked; the controller leaves it; finalize releases it.
    status, out = chain.json("DELETE", f"/api/v1/namespaces/{name}")
    assert status == 200 and out["status"]["phase"] == "Terminating"
    time.sleep(0.5)
    status, current = chain.json("GET", f"/api/v1/namespaces/{name}")
    assert status == 200
    current["spec"]["finalizers"] = []
    status, out = chain.json("PUT", path, current)
    assert status == 200, out
    wait_gone(chain, f"/api/v1/namespaces/{name}")


def test_immortal_namespace_and_uid_precondition(chain: ChainHandle) -> None:
    status, err = chain.json("DELETE", "/api/v1/namespaces/default")
    assert status == 403, err
    assert err["message"] == 'namespaces "default" is forbidden: this namespace may not be deleted'
    create_ns(chain, "nsdel-precond")
    status, err = chain.json("DELETE", "/api/v1/namespaces/nsdel-precond",
                             {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "wrong"}})
    assert status == 409, err
    assert "Precondition failed: UID in precondition: wrong" in err["message"]
    chain.kubectl("delete", "namespace", "nsdel-precond")


KINDS: list[tuple[str, dict[str, Any]]] = [
    ("/api/v1/namespaces/{ns}/configmaps", {"data": {"k": "v"}}),
    ("/api/v1/namespaces/{ns}/secrets", {"stringData": {"k": "v"}}),
    ("/api/v1/namespaces/{ns}/serviceaccounts", {}),
    ("/api/v1/namespaces/{ns}/endpoints", {}),
    ("/api/v1/namespaces/{ns}/pods", {"spec": POD["spec"]}),
    ("/api/v1/namespaces/{ns}/podtemplates", {"template": {"spec": POD["spec"]}}),
    ("/api/v1/namespaces/{ns}/limitranges", {"spec": {"limits": [{"type": "Container"}]}}),
    ("/api/v1/namespaces/{ns}/resourcequotas", {"spec": {}}),
    ("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", {"spec": {}}),
    ("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles", {"rules": []}),
]


def test_500_objects_of_10_kinds_deleted_fast(chain: ChainHandle) -> None:
    name = "nsdel-bulk"
    create_ns(chain, name)

    def make(i: int) -> None:
        path, extra = KINDS[i % len(KINDS)]
        status, out = chain.json("POST", path.format(ns=name), {**extra, "metadata": {"name": f"o{i}"}})
        assert status == 201, out

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(make, range(500)))
    assert len(etcd_keys(chain.chain, f"/{name}/")) >= 500
    started = time.monotonic()
    status, _ = chain.json("DELETE", f"/api/v1/namespaces/{name}")
    assert status == 200
    wait_gone(chain, f"/api/v1/namespaces/{name}", timeout=10)
    took = time.monotonic() - started
    print(f"namespace with 500 objects of 10 kinds deleted in {took:.2f}s")
    assert took < 10
    assert etcd_keys(chain.chain, f"/{name}") == []
