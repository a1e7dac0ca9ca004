"""The garbage collector on the real chain: background, foreground and orphan cascades with kubectl,
dangling owners, the Job default, and references that can never resolve."""

from __future__ import annotations

import time
from typing import Any

import pytest
from support.objects import create, gone, owner_ref
from support.procs import ChainHandle
from support.waiting import eventually
from test_namespace_deletion import POD, etcd_keys

pytestmark = pytest.mark.integration

NS = "gc-tests"
LABELS = {"app": "gc"}
TEMPLATE = {"metadata": {"labels": LABELS}, "spec": POD["spec"]}


@pytest.fixture(scope="module")
def ns(chain: ChainHandle) -> str:
    status, out = chain.json("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    assert status in (201, 409), out
    return NS


def chain_of(chain: ChainHandle, name: str, block: bool = True) -> tuple[dict[str, Any], ...]:
    """Deployment -> ReplicaSet -> Pod, ownerReferences set by hand (no controllers for these kinds)."""
    spec = {"replicas": 1, "selector": {"matchLabels": LABELS}, "template": TEMPLATE}
    dep = create(chain, f"/apis/apps/v1/namespaces/{NS}/deployments", {"metadata": {"name": name}, "spec": spec})
    rs = create(chain, f"/apis/apps/v1/namespaces/{NS}/replicasets",
                {"metadata": {"name": f"{name}-rs", "ownerReferences": [owner_ref(dep, block=block)]}, "spec": spec})
    pod = create(chain, f"/api/v1/namespaces/{NS}/pods",
                 {**POD, "metadata": {"name": f"{name}-pod", "ownerReferences": [owner_ref(rs, block=block)]}})
    return dep, rs, pod


def rs_path(name: str) -> str:
    return f"/apis/apps/v1/namespaces/{NS}/replicasets/{name}-rs"


def pod_path(name: str) -> str:
    return f"/api/v1/namespaces/{NS}/pods/{name}-pod"


def test_background_cascade(chain: ChainHandle, ns: str) -> None:
    chain_of(chain, "bg")
    out = chain.kubectl("-n", ns, "delete", "deployment", "bg")
    assert 'deployment.apps "bg" deleted' in out.stdout
    eventually(lambda: gone(chain, rs_path("bg")) and gone(chain, pod_path("bg")), what="dependents collected")
    assert etcd_keys(chain.chain, f"/{ns}/bg") == []


def test_foreground_cascade_waits_for_blocking_dependents(chain: ChainHandle, ns: str) -> None:
    chain_of(chain, "fg")
    # A finalizer on the pod holds the chain: the Deployment waits with foregroundDeletion.
    status, _ = chain.json("PATCH", pod_path("fg"), {"metadata": {"finalizers": ["example.com/hold"]}},
                           headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200
    status, out = chain.json("DELETE", f"/apis/apps/v1/namespaces/{ns}/deployments/fg",
                             {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"})
    assert status == 200, out
    assert out["metadata"]["finalizers"] == ["foregroundDeletion"] and out["metadata"]["deletionTimestamp"]

    def pod_terminating() -> bool:
        _s, pod = chain.json("GET", pod_path("fg"))
        return bool(pod.get("metadata", {}).get("deletionTimestamp"))

    eventually(pod_terminating, what="pod deleted in the foreground")
    time.sleep(0.5)
    _s, dep = chain.json("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/fg")
    assert dep["metadata"]["finalizers"] == ["foregroundDeletion"], dep
    _s, rs = chain.json("GET", rs_path("fg"))
    assert rs["metadata"]["finalizers"] == ["foregroundDeletion"], rs  # deleted in the foreground in turn
    chain.json("PATCH", pod_path("fg"), {"metadata": {"finalizers": None}},
               headers={"Content-Type": "application/merge-patch+json"})
    eventually(lambda: gone(chain, f"/apis/apps/v1/namespaces/{ns}/deployments/fg"), what="owner released")
    assert gone(chain, rs_path("fg")) and gone(chain, pod_path("fg"))


def test_kubectl_cascade_foreground(chain: ChainHandle, ns: str) -> None:
    chain_of(chain, "kfg")
    out = chain.kubectl("-n", ns, "delete", "deployment", "kfg", "--cascade=foreground", timeout=60)
    assert 'deployment.apps "kfg" deleted' in out.stdout
    # kubectl waited for the Deployment, which waited for its blocking dependents.
    assert gone(chain, rs_path("kfg")) and gone(chain, pod_path("kfg"))
    assert etcd_keys(chain.chain, f"/{ns}/kfg") == []


def test_kubectl_cascade_orphan(chain: ChainHandle, ns: str) -> None:
    _dep, rs, _pod = chain_of(chain, "orph")
    out = chain.kubectl("-n", ns, "delete", "deployment", "orph", "--cascade=orphan", timeout=60)
    assert 'deployment.apps "orph" deleted' in out.stdout
    eventually(lambda: gone(chain, f"/apis/apps/v1/namespaces/{ns}/deployments/orph"), what="owner gone")
    status, got = chain.json("GET", rs_path("orph"))
    assert status == 200 and "ownerReferences" not in got["metadata"], got
    status, pod = chain.json("GET", pod_path("orph"))
    assert status == 200 and pod["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]
    time.sleep(0.5)
    assert not gone(chain, rs_path("orph")) and not gone(chain, pod_path("orph"))


def test_dangling_owner_references_are_collected(chain: ChainHandle, ns: str) -> None:
    base = f"/api/v1/namespaces/{ns}/configmaps"
    owner = create(chain, base, {"metadata": {"name": "real-owner"}})
    ghost = {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": "6b7e4c1e-0000-4000-8000-000000000001"}
    create(chain, base, {"metadata": {"name": "dangling", "ownerReferences": [ghost]}})
    wrong_uid = {**owner_ref(owner), "uid": "6b7e4c1e-0000-4000-8000-000000000002"}
    create(chain, base, {"metadata": {"name": "wrong-uid", "ownerReferences": [wrong_uid]}})
    create(chain, base, {"metadata": {"name": "kept", "ownerReferences": [owner_ref(owner)]}})
    create(chain, base, {"metadata": {"name": "mixed", "ownerReferences": [owner_ref(owner, controller=False), ghost]}})
    eventually(lambda: gone(chain, f"{base}/dangling") and gone(chain, f"{base}/wrong-uid"), what="dangling collected")

    def mixed_pruned() -> bool:
        _s, obj = chain.json("GET", f"{base}/mixed")
        return [r["name"] for r in obj["metadata"].get("ownerReferences", [])] == ["real-owner"]

    eventually(mixed_pruned, what="absent owner dropped from a dependent with a live owner")
    assert not gone(chain, f"{base}/kept")
    # A cluster-scoped owner is looked up cluster-wide: a missing Node collects its dependent.
    node_ref = {"apiVersion": "v1", "kind": "Node", "name": "no-node", "uid": "6b7e4c1e-0000-4000-8000-000000000003"}
    create(chain, base, {"metadata": {"name": "on-node", "ownerReferences": [node_ref]}})
    eventually(lambda: gone(chain, f"{base}/on-node"), what="dependent of a missing Node collected")


def test_unresolvable_and_invalid_references(chain: ChainHandle, ns: str) -> None:
    base = f"/api/v1/namespaces/{ns}/configmaps"
    # A version the chain does not serve cannot be resolved: the dependent stays (as kube).
    bad_version = {"apiVersion": "apps/v9", "kind": "Deployment", "name": "x",
                   "uid": "6b7e4c1e-0000-4000-8000-0000000009"}
    create(chain, base, {"metadata": {"name": "unresolvable", "ownerReferences": [bad_version]}})
    # Validation of ownerReferences, with kube-apiserver's messages.
    status, err = chain.json("POST", base, {"metadata": {"name": "no-uid", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": ""}]}})
    assert status == 422, err
    assert err["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "metadata.ownerReferences.uid",
                                         "message": 'Invalid value: "": uid must not be empty'}]
    status, err = chain.json("POST", base, {"metadata": {"name": "no-version", "ownerReferences": [
        {"apiVersion": "apps/", "kind": "Deployment", "name": "x", "uid": "u"}]}})
    assert status == 422, err
    assert err["details"]["causes"][0]["field"] == "metadata.ownerReferences.apiVersion"
    assert err["details"]["causes"][0]["message"] == 'Invalid value: "apps/": version must not be empty'
    status, err = chain.json("POST", base, {"metadata": {"name": "no-uid-at-all", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "x"}]}})
    assert status == 422, err
    two = [{"apiVersion": "v1", "kind": "ConfigMap", "name": n, "uid": n, "controller": True} for n in ("a", "b")]
    status, err = chain.json("POST", base, {"metadata": {"name": "two-controllers", "ownerReferences": two}})
    assert status == 422, err
    assert "Only one reference can have Controller set to true" in err["message"]
    time.sleep(1.0)
    assert not gone(chain, f"{base}/unresolvable")


def test_job_orphans_by_default_with_a_warning(chain: ChainHandle, ns: str) -> None:
    job = create(chain, f"/apis/batch/v1/namespaces/{ns}/jobs", {"metadata": {"name": "job"}, "spec": {
        "template": {"spec": {**POD["spec"], "restartPolicy": "Never"}}}})
    create(chain, f"/api/v1/namespaces/{ns}/pods",
           {**POD, "metadata": {"name": "job-pod", "ownerReferences": [owner_ref(job)]}})
    status, headers, _body = chain.request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/job")
    assert status == 200
    assert "child pods are preserved by default when jobs are deleted" in headers.get("warning", "")
    eventually(lambda: gone(chain, f"/apis/batch/v1/namespaces/{ns}/jobs/job"), what="job gone")
    status, pod = chain.json("GET", f"/api/v1/namespaces/{ns}/pods/job-pod")
    assert status == 200 and "ownerReferences" not in pod["metadata"], pod
    # kubectl asks for background propagation: the pod goes with its job.
    job2 = create(chain, f"/apis/batch/v1/namespaces/{ns}/jobs", {"metadata": {"name": "job2"}, "spec": {
        "template": {"spec": {**POD["spec"], "restartPolicy": "Never"}}}})
    create(chain, f"/api/v1/namespaces/{ns}/pods",
           {**POD, "metadata": {"name": "job2-pod", "ownerReferences": [owner_ref(job2)]}})
    out = chain.kubectl("-n", ns, "delete", "job", "job2")
    assert "Warning" not in out.stderr
    eventually(lambda: gone(chain, f"/api/v1/namespaces/{ns}/pods/job2-pod"), what="job pod collected")
