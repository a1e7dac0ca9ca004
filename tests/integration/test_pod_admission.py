"""The Priority and DefaultTolerationSeconds admission plugins on the running chain, through kubectl:
new Pods come back with the priority fields and the two NoExecute tolerations a real cluster adds,
the system PriorityClasses exist, and the plugins' rejections read as kube-apiserver's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.procs import ChainHandle
from support.waiting import eventually

pytestmark = pytest.mark.integration

NS = "pod-admission-it"

DEFAULT_TOLERATIONS = [
    {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300},
    {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300},
]

MANIFEST = f"""
apiVersion: v1
kind: Pod
metadata: {{name: applied, namespace: {NS}}}
spec:
  containers: [{{name: app, image: "busybox:1.36", args: [sleep, "3600"]}}]
  tolerations: [{{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 60}}]
"""


@pytest.fixture(scope="module")
def ns(chain: ChainHandle) -> Iterator[str]:
    chain.kubectl("create", "namespace", NS)
    yield NS
    chain.kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=false", check=False)


def get_pod(chain: ChainHandle, name: str) -> dict[str, Any]:
    return json.loads(chain.kubectl("get", "pod", name, "-n", NS, "-o", "json").stdout)  # type: ignore[no-any-return]


def test_system_priority_classes_are_bootstrapped(chain: ChainHandle) -> None:
    out = chain.kubectl("get", "priorityclasses", "-o", "json").stdout
    classes = {item["metadata"]["name"]: item for item in json.loads(out)["items"]}
    node, cluster = classes["system-node-critical"], classes["system-cluster-critical"]
    assert (node["value"], cluster["value"]) == (2000001000, 2000000000)
    assert node["description"] == "Used for system critical pods that must not be moved from their current node."
    assert all(c["preemptionPolicy"] == "PreemptLowerPriority" and "globalDefault" not in c for c in (node, cluster))
    table = chain.kubectl("get", "priorityclasses").stdout
    assert "system-node-critical" in table and "system-cluster-critical" in table


def test_kubectl_run_pod_gets_priority_and_default_tolerations(chain: ChainHandle, ns: str) -> None:
    chain.kubectl("run", "plain", "--image=nginx", "-n", ns)
    spec = get_pod(chain, "plain")["spec"]
    assert spec["priority"] == 0 and spec["preemptionPolicy"] == "PreemptLowerPriority"
    assert "priorityClassName" not in spec
    assert spec["tolerations"] == DEFAULT_TOLERATIONS


def test_named_system_class_sets_its_priority(chain: ChainHandle, ns: str) -> None:
    override = {"spec": {"priorityClassName": "system-node-critical"}}
    chain.kubectl("run", "critical", "--image=nginx", "-n", ns, f"--overrides={json.dumps(override)}")
    spec = get_pod(chain, "critical")["spec"]
    assert (spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]) == \
        ("system-node-critical", 2000001000, "PreemptLowerPriority")


def test_unknown_class_is_forbidden(chain: ChainHandle, ns: str) -> None:
    override = {"spec": {"priorityClassName": "no-such-class"}}
    out = chain.kubectl("run", "orphan", "--image=nginx", "-n", ns, f"--overrides={json.dumps(override)}",
                        check=False)
    assert out.returncode == 1
    assert 'Error from server (Forbidden): pods "orphan" is forbidden: no PriorityClass with name no-such-class ' \
           "was found" in out.stderr, out.stderr
    assert chain.kubectl("get", "pod", "orphan", "-n", ns, check=False).returncode == 1


def test_mismatched_priority_and_policy_are_forbidden(chain: ChainHandle, ns: str) -> None:
    status, body = chain.json("POST", f"/api/v1/namespaces/{ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "greedy"},
        "spec": {"priority": 5, "containers": [{"name": "c", "image": "nginx"}]}})
    assert status == 403 and body["reason"] == "Forbidden"
    assert body["message"] == ('pods "greedy" is forbidden: the integer value of priority (5) must not be provided '
                               "in pod spec; priority admission controller computed 0 from the given PriorityClass "
                               "name")
    assert body["details"] == {"name": "greedy", "kind": "pods"}
    override = {"spec": {"preemptionPolicy": "Never"}}
    out = chain.kubectl("run", "polite", "--image=nginx", "-n", ns, f"--overrides={json.dumps(override)}",
                        check=False)
    assert out.returncode == 1 and "Forbidden" in out.stderr
    assert "the string value of PreemptionPolicy (Never) must not be provided in pod spec" in out.stderr
    # the computed value itself may be stated
    same = {"spec": {"priority": 0, "preemptionPolicy": "PreemptLowerPriority"}}
    chain.kubectl("run", "honest", "--image=nginx", "-n", ns, f"--overrides={json.dumps(same)}")
    assert get_pod(chain, "honest")["spec"]["priority"] == 0


def test_global_default_class_and_only_one(chain: ChainHandle, ns: str) -> None:
    doc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "it-default"},
           "value": 1234, "globalDefault": True, "preemptionPolicy": "Never"}
    chain.kubectl("create", "-f", "-", input=json.dumps(doc))
    try:
        chain.kubectl("run", "defaulted", "--image=nginx", "-n", ns)
        spec = get_pod(chain, "defaulted")["spec"]
        assert (spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]) == \
            ("it-default", 1234, "Never")
        second = dict(doc, metadata={"name": "it-default-2"})
        out = chain.kubectl("create", "-f", "-", input=json.dumps(second), check=False)
        assert out.returncode == 1
        assert ('priorityclasses.scheduling.k8s.io "it-default-2" is forbidden: PriorityClass it-default is '
                "already marked as default. Only one default can exist") in out.stderr, out.stderr
    finally:
        chain.kubectl("delete", "priorityclass", "it-default", "--ignore-not-found")


def test_apply_then_diff_and_replace_keep_the_admitted_fields(chain: ChainHandle, ns: str) -> None:
    assert "pod/applied created" in chain.kubectl("apply", "-f", "-", input=MANIFEST).stdout
    pod = get_pod(chain, "applied")
    # the pod's own unreachable toleration stands; only not-ready is added
    assert pod["spec"]["tolerations"] == [
        {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists",
         "tolerationSeconds": 60},
        DEFAULT_TOLERATIONS[0]]
    for version in ("1.27", "1.33"):
        same = chain.kubectl("diff", "-f", "-", input=MANIFEST, version=version, check=False)
        assert same.returncode == 0, same.stdout + same.stderr
    # Re-applying changes nothing but, as on kube-apiserver, the time of the applier's managedFields
    # entry (kubectl's patch restates the atomic tolerations list without the added one, which the
    # field manager counts as a change before admission adds it back); kubectl says "configured".
    chain.kubectl("apply", "-f", "-", input=MANIFEST)
    again = get_pod(chain, "applied")
    unchanged = ("resourceVersion", "managedFields")
    assert {k: v for k, v in again["metadata"].items() if k not in unchanged} == \
        {k: v for k, v in pod["metadata"].items() if k not in unchanged}
    assert again["spec"] == pod["spec"]
    # a PUT of the object without the admitted fields keeps them (nothing changes)
    # (only the updater's managedFields time may move, as on kube-apiserver)
    bare = {"apiVersion": "v1", "kind": "Pod", "metadata": again["metadata"],
            "spec": {k: v for k, v in pod["spec"].items() if k not in ("priority", "preemptionPolicy")}}
    bare["spec"]["tolerations"] = pod["spec"]["tolerations"][:1]
    status, body = chain.json("PUT", f"/api/v1/namespaces/{NS}/pods/applied", bare)
    assert status == 200, body
    assert body["spec"]["priority"] == 0 and body["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    assert body["spec"] == again["spec"]


def test_reserved_names_ceiling_and_immutable_value(chain: ChainHandle) -> None:
    out = chain.kubectl("create", "priorityclass", "system-mine", "--value=10", check=False)
    assert out.returncode != 0
    assert ('PriorityClass.scheduling.k8s.io "system-mine" is invalid: metadata.name: Forbidden: priority class '
            "names with 'system-' prefix are reserved for system use only. error: system-mine is not a known "
            "system priority class") in out.stderr
    out = chain.kubectl("create", "priorityclass", "too-high", "--value=1000000001", check=False)
    assert out.returncode != 0
    assert "value: Forbidden: maximum allowed value of a user defined priority is 1000000000" in out.stderr
    chain.kubectl("create", "priorityclass", "pc-fixed", "--value=7")
    try:
        status, body = chain.json("PATCH", "/apis/scheduling.k8s.io/v1/priorityclasses/pc-fixed", {"value": 8},
                                  headers={"Content-Type": "application/merge-patch+json"})
        assert status == 422 and body["reason"] == "Invalid", body
        assert body["details"]["causes"] == [{"reason": "FieldValueForbidden",
                                              "message": "Forbidden: may not be changed in an update.",
                                              "field": "value"}]
        status, body = chain.json("PATCH", "/apis/scheduling.k8s.io/v1/priorityclasses/pc-fixed",
                                  {"description": "words may change"},
                                  headers={"Content-Type": "application/merge-patch+json"})
        assert status == 200 and body["value"] == 7
    finally:
        chain.kubectl("delete", "priorityclass", "pc-fixed")


def test_status_writes_are_not_admitted_but_updates_of_the_pod_are(chain: ChainHandle, ns: str) -> None:
    """kube's plugins leave subresource writes alone: a pod stored without the default tolerations
    (by an older server; staged in etcd) keeps its spec through a /status write, and gets them on
    its next update of the pod itself (DefaultTolerationSeconds admits updates too)."""
    from support.coreapi_procs import etcd_put, etcd_value

    chain.kubectl("run", "old-pod", "--image=busybox:1.36", "-n", ns)
    key = f"{chain.chain.etcd_prefix}/pods/{ns}/old-pod"
    stored = json.loads(etcd_value(chain.chain.etcd_endpoints, key))
    stored["spec"].pop("tolerations")
    etcd_put(chain.chain.etcd_endpoints, key, json.dumps(stored).encode())
    path = f"/api/v1/namespaces/{ns}/pods/old-pod"
    eventually(lambda: "tolerations" not in chain.json("GET", path)[1]["spec"], 10, "the staged pod served")
    _status, live = chain.json("GET", path)
    live["status"]["message"] = "written through /status"
    status, out = chain.json("PUT", f"{path}/status", live)
    assert status == 200, out
    assert out["status"]["message"] == "written through /status" and "tolerations" not in out["spec"]
    status, out = chain.json("PATCH", path, {"metadata": {"labels": {"touched": "yes"}}},
                             headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200, out
    assert out["spec"]["tolerations"] == DEFAULT_TOLERATIONS
