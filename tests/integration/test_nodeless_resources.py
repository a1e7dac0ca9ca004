"""What a node-less kube-apiserver 1.33 serves, against the real chain: componentstatuses, bindings
and pods/binding, pods/eviction with PodDisruptionBudgets, the authorization.k8s.io/v1 reviews.

Exact Status bodies over raw HTTP; the kubectl commands that exist for them (``get cs``,
``create -f`` of a Binding, ``auth can-i``) with kubectl 1.27 and 1.33; bad inputs included.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.objects import status_of
from support.procs import ChainHandle, kubectl_params

pytestmark = pytest.mark.integration

VERSIONS = ["1.27", "1.33"]


KUBECTLS = kubectl_params(*VERSIONS)


def pods_path(ns: str, name: str = "", sub: str = "") -> str:
    out = f"/api/v1/namespaces/{ns}/pods"
    if name:
        out += f"/{name}"
    if sub:
        out += f"/{sub}"
    return out


def make_pod(chain: ChainHandle, ns: str, name: str, labels: dict[str, str] | None = None,
             **spec: Any) -> dict[str, Any]:
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}], **spec}}
    status, created = chain.json("POST", pods_path(ns), body)
    assert status == 201, created
    return dict(created)


def run_pod(chain: ChainHandle, ns: str, name: str, labels: dict[str, str], ready: bool = True) -> dict[str, Any]:
    """A Pod as a kubelet would report it: bound, Running, Ready (or not)."""
    make_pod(chain, ns, name, labels, nodeName="node-1")
    status, pod = chain.json("GET", pods_path(ns, name))
    pod["status"] = {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True" if ready else "False", "lastProbeTime": None,
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    status, updated = chain.json("PUT", pods_path(ns, name, "status"), pod)
    assert status == 200, updated
    return dict(updated)


SUCCESS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


@pytest.fixture(scope="module")
def ns(chain: ChainHandle) -> str:
    chain.kubectl("create", "namespace", "nodeless")
    return "nodeless"


# --------------------------------------------------------------------------- discovery


def test_discovery_lists_the_resources_as_kube(chain: ChainHandle) -> None:
    _, core = chain.json("GET", "/api/v1")
    by_name = {r["name"]: r for r in core["resources"]}
    assert by_name["bindings"] == {"name": "bindings", "singularName": "binding", "namespaced": True,
                                   "kind": "Binding", "verbs": ["create"]}
    assert by_name["componentstatuses"] == {"name": "componentstatuses", "singularName": "componentstatus",
                                            "namespaced": False, "kind": "ComponentStatus",
                                            "verbs": ["get", "list"], "shortNames": ["cs"]}
    assert by_name["pods/binding"] == {"name": "pods/binding", "singularName": "", "namespaced": True,
                                       "kind": "Binding", "verbs": ["create"]}
    assert by_name["pods/eviction"] == {"name": "pods/eviction", "singularName": "", "namespaced": True,
                                        "group": "policy", "version": "v1", "kind": "Eviction",
                                        "verbs": ["create"]}
    _, authz = chain.json("GET", "/apis/authorization.k8s.io/v1")
    assert [(r["name"], r["namespaced"], r["verbs"]) for r in authz["resources"]] == [
        ("localsubjectaccessreviews", True, ["create"]), ("selfsubjectaccessreviews", False, ["create"]),
        ("selfsubjectrulesreviews", False, ["create"]), ("subjectaccessreviews", False, ["create"])]
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    _, _, raw = chain.request("GET", "/api", headers={"Accept": accept})
    pods = next(r for r in json.loads(raw)["items"][0]["versions"][0]["resources"] if r["resource"] == "pods")
    subs = {s["subresource"]: s for s in pods["subresources"]}
    assert subs["eviction"] == {"subresource": "eviction", "verbs": ["create"],
                                "responseKind": {"group": "policy", "version": "v1", "kind": "Eviction"}}
    assert subs["binding"]["responseKind"] == {"group": "", "version": "", "kind": "Binding"}
    _, _, raw = chain.request("GET", "/apis", headers={"Accept": accept})
    groups = {g["metadata"]["name"]: g for g in json.loads(raw)["items"]}
    assert [r["resource"] for r in groups["authorization.k8s.io"]["versions"][0]["resources"]] == [
        "localsubjectaccessreviews", "selfsubjectaccessreviews", "selfsubjectrulesreviews", "subjectaccessreviews"]


# --------------------------------------------------------------------------- componentstatuses


@pytest.mark.parametrize("version", KUBECTLS)
def test_kubectl_get_componentstatuses(chain: ChainHandle, version: str) -> None:
    proc = chain.kubectl("get", "componentstatuses", version=version)
    assert "Warning: v1 ComponentStatus is deprecated in v1.19+" in proc.stderr
    rows = {line.split()[0]: line for line in proc.stdout.splitlines()[1:]}
    assert proc.stdout.split()[:4] == ["NAME", "STATUS", "MESSAGE", "ERROR"]
    assert rows["etcd-0"].split()[1:] == ["Healthy", "ok"]
    assert rows["scheduler"].split()[1] == "Unhealthy"
    assert ('Get "https://127.0.0.1:10259/healthz": dial tcp 127.0.0.1:10259: connect: connection refused'
            in rows["scheduler"])
    assert 'Get "https://127.0.0.1:10257/healthz"' in rows["controller-manager"]
    one = json.loads(chain.kubectl("get", "cs", "etcd-0", "-o", "json", version=version).stdout)
    assert one == {"apiVersion": "v1", "kind": "ComponentStatus", "metadata": {"name": "etcd-0",
                                                                               "creationTimestamp": None},
                   "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]}


def test_componentstatuses_over_http(chain: ChainHandle) -> None:
    status, headers, raw = chain.request("GET", "/api/v1/componentstatuses")
    assert status == 200
    assert headers["warning"] == '299 - "v1 ComponentStatus is deprecated in v1.19+"'
    body = json.loads(raw)
    assert body["kind"] == "ComponentStatusList" and body["metadata"] == {}
    assert sorted(i["metadata"]["name"] for i in body["items"]) == ["controller-manager", "etcd-0", "scheduler"]
    scheduler = next(i for i in body["items"] if i["metadata"]["name"] == "scheduler")
    assert scheduler["conditions"] == [{"type": "Healthy", "status": "False", "message":
                                        'Get "https://127.0.0.1:10259/healthz": dial tcp 127.0.0.1:10259: '
                                        "connect: connection refused"}]
    status, body = chain.json("GET", "/api/v1/componentstatuses?fieldSelector=metadata.name%3Detcd-0")
    assert [i["metadata"]["name"] for i in body["items"]] == ["etcd-0"]
    status, body = chain.json("GET", "/api/v1/componentstatuses?labelSelector=a%3Db")
    assert body["items"] == []
    # kube answers an unknown component with a plain Go error: 500, no reason.
    assert chain.json("GET", "/api/v1/componentstatuses/nope") == (
        500, status_of(500, "Component not found: nope"))
    status, body = chain.json("POST", "/api/v1/componentstatuses", {"kind": "ComponentStatus"})
    assert (status, body["reason"]) == (405, "MethodNotAllowed")
    assert chain.json("GET", "/api/v1/componentstatuses?watch=true") == (405, status_of(
        405, 'watch is not supported on resources of kind "componentstatuses"', "MethodNotAllowed",
        {"kind": "componentstatuses"}))
    assert chain.json("GET", "/api/v1/watch/componentstatuses")[0] == 404


# --------------------------------------------------------------------------- bindings


def binding(name: str, node: str = "node-1", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, **meta},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}


def test_pod_binding_assigns_the_node(chain: ChainHandle, ns: str) -> None:
    make_pod(chain, ns, "b1")
    body = binding("b1", annotations={"scheduler.example/score": "7"})
    assert chain.json("POST", pods_path(ns, "b1", "binding"), body) == (201, SUCCESS)
    _, pod = chain.json("GET", pods_path(ns, "b1"))
    assert pod["spec"]["nodeName"] == "node-1"
    assert pod["metadata"]["annotations"]["scheduler.example/score"] == "7"
    scheduled = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert [(c["status"], c["lastProbeTime"]) for c in scheduled] == [("True", None)]
    # A second binding is refused as kube refuses it.
    assert chain.json("POST", pods_path(ns, "b1", "binding"), binding("b1", "node-2")) == (409, status_of(
        409, 'Operation cannot be fulfilled on pods/binding "b1": pod b1 is already assigned to node "node-1"',
        "Conflict", {"name": "b1", "kind": "pods/binding"}))


@pytest.mark.parametrize("version", KUBECTLS)
def test_kubectl_create_binding(chain: ChainHandle, ns: str, version: str) -> None:
    name = f"kb{version.replace('.', '')}"
    make_pod(chain, ns, name)
    manifest = f"apiVersion: v1\nkind: Binding\nmetadata: {{name: {name}}}\ntarget: {{kind: Node, name: node-9}}\n"
    chain.kubectl("create", "-n", ns, "-f", "-", input=manifest, version=version)
    _, pod = chain.json("GET", pods_path(ns, name))
    assert pod["spec"]["nodeName"] == "node-9"
    proc = chain.kubectl("create", "-n", ns, "-f", "-", input=manifest, version=version, check=False)
    assert proc.returncode != 0
    assert f'pod {name} is already assigned to node "node-9"' in proc.stderr


def test_binding_bad_inputs(chain: ChainHandle, ns: str) -> None:
    make_pod(chain, ns, "b2")
    url = pods_path(ns, "b2", "binding")
    assert chain.json("POST", url, binding("other")) == (
        400, status_of(400, "name in URL does not match name in Binding object", "BadRequest"))
    no_target = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "b2"}}
    # kube's ValidatePodBinding error is returned unconverted: a 500 without a reason.
    assert chain.json("POST", url, no_target) == (500, status_of(500, "target.name: Required value"))
    pod_target = {**no_target, "target": {"kind": "Pod"}}
    assert chain.json("POST", url, pod_target) == (500, status_of(
        500, '[target.kind: Unsupported value: "Pod": supported values: "Node", "<empty>", '
             "target.name: Required value]"))
    status, body = chain.json("POST", url, {**binding("b2"), "kind": "Pod"})
    assert (status, body["message"]) == (400, "the kind in the data (Pod) does not match the expected kind (Binding)")
    assert chain.json("POST", pods_path(ns, "ghost", "binding"), binding("ghost")) == (
        404, status_of(404, 'pods "ghost" not found', "NotFound", {"name": "ghost", "kind": "pods"}))
    _, pod = chain.json("GET", pods_path(ns, "b2"))
    wrong_uid = binding("b2", uid="00000000-0000-0000-0000-000000000000")
    status, body = chain.json("POST", url, wrong_uid)
    assert status == 409 and body["reason"] == "Conflict"
    assert body["message"] == (
        f'Operation cannot be fulfilled on pods "b2": StorageError: invalid object, Code: 4, '
        f"Key: /registry/pods/{ns}/b2, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: "
        f"UID in precondition: 00000000-0000-0000-0000-000000000000, UID in object meta: {pod['metadata']['uid']}")
    status, body = chain.json("POST", url, binding("b2", resourceVersion="1"))
    assert status == 409 and "ResourceVersion in precondition: 1, ResourceVersion in object meta: " in body["message"]
    status, body = chain.json("GET", url)
    assert (status, body["reason"]) == (405, "MethodNotAllowed")
    other_ns = binding("b2", namespace="default")
    assert chain.json("POST", url, other_ns) == (400, status_of(
        400, "the namespace of the provided object does not match the namespace sent on the request", "BadRequest"))
    # dry run: answered, nothing written
    assert chain.json("POST", url + "?dryRun=All", binding("b2")) == (201, SUCCESS)
    assert "nodeName" not in chain.json("GET", pods_path(ns, "b2"))[1]["spec"]
    # the right preconditions bind
    exact = binding("b2", uid=pod["metadata"]["uid"], resourceVersion=pod["metadata"]["resourceVersion"])
    assert chain.json("POST", url, exact) == (201, SUCCESS)


def test_binding_refused_while_deleting_or_gated(chain: ChainHandle, ns: str) -> None:
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b3", "finalizers": ["example.com/hold"]},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}
    assert chain.json("POST", pods_path(ns), body)[0] == 201
    assert chain.json("DELETE", pods_path(ns, "b3"))[0] == 200
    assert chain.json("POST", pods_path(ns, "b3", "binding"), binding("b3")) == (409, status_of(
        409, 'Operation cannot be fulfilled on pods/binding "b3": pod b3 is being deleted, cannot be assigned '
             "to a host", "Conflict", {"name": "b3", "kind": "pods/binding"}))
    status, _, _ = chain.request("PATCH", pods_path(ns, "b3"), {"metadata": {"finalizers": None}},
                                 headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200
    make_pod(chain, ns, "b4", schedulingGates=[{"name": "example.com/gate"}])
    status, body = chain.json("POST", pods_path(ns, "b4", "binding"), binding("b4"))
    assert (status, body["message"]) == (
        409, 'Operation cannot be fulfilled on pods/binding "b4": pod b4 has non-empty .spec.schedulingGates')


def test_legacy_bindings_resource(chain: ChainHandle, ns: str) -> None:
    make_pod(chain, ns, "b5")
    assert chain.json("POST", f"/api/v1/namespaces/{ns}/bindings", binding("b5")) == (201, SUCCESS)
    assert chain.json("GET", pods_path(ns, "b5"))[1]["spec"]["nodeName"] == "node-1"
    status, body = chain.json("POST", f"/api/v1/namespaces/{ns}/bindings",
                              {"apiVersion": "v1", "kind": "Binding", "metadata": {}, "target": {"name": "n"}})
    assert (status, body["message"]) == (400, "Name parameter required.")
    status, body = chain.json("GET", f"/api/v1/namespaces/{ns}/bindings")
    assert (status, body["reason"]) == (405, "MethodNotAllowed")


# --------------------------------------------------------------------------- eviction


def eviction(name: str, version: str = "policy/v1", **delete_options: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": version, "kind": "Eviction", "metadata": {"name": name}}
    if delete_options:
        out["deleteOptions"] = delete_options
    return out


def make_pdb(chain: ChainHandle, ns: str, name: str, app: str, allowed: int | None, *, healthy: int = 2,
             desired: int = 2, policy: str | None = None, processed: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}}
    if policy:
        spec["unhealthyPodEvictionPolicy"] = policy
    body = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name}, "spec": spec}
    url = f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"
    status, pdb = chain.json("POST", url, body)
    assert status == 201, pdb
    if allowed is None:
        return dict(pdb)
    pdb["status"] = {"observedGeneration": pdb["metadata"]["generation"] if processed else 0,
                     "disruptionsAllowed": allowed, "currentHealthy": healthy, "desiredHealthy": desired,
                     "expectedPods": healthy}
    status, pdb = chain.json("PUT", f"{url}/{name}/status", pdb)
    assert status == 200, pdb
    return dict(pdb)


def get_pdb(chain: ChainHandle, ns: str, name: str) -> dict[str, Any]:
    return dict(chain.json("GET", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{name}")[1])


def test_eviction_without_a_budget_deletes(chain: ChainHandle, ns: str) -> None:
    make_pod(chain, ns, "e1")  # Pending: deleted without a budget check
    assert chain.json("POST", pods_path(ns, "e1", "eviction"), eviction("e1")) == (201, SUCCESS)
    assert chain.json("GET", pods_path(ns, "e1"))[0] == 404
    run_pod(chain, ns, "e2", {"app": "lonely"})
    assert chain.json("POST", pods_path(ns, "e2", "eviction"), eviction("e2", "policy/v1beta1")) == (201, SUCCESS)
    _, pod = chain.json("GET", pods_path(ns, "e2"))
    assert pod["metadata"]["deletionTimestamp"]  # bound: deleted gracefully
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 30


def test_eviction_spends_the_budget(chain: ChainHandle, ns: str) -> None:
    make_pdb(chain, ns, "web", "web", 1)
    run_pod(chain, ns, "w1", {"app": "web"})
    run_pod(chain, ns, "w2", {"app": "web"})
    # dry run: answered, nothing written
    assert chain.json("POST", pods_path(ns, "w1", "eviction") + "?dryRun=All", eviction("w1")) == (201, SUCCESS)
    assert get_pdb(chain, ns, "web")["status"]["disruptionsAllowed"] == 1
    assert "deletionTimestamp" not in chain.json("GET", pods_path(ns, "w1"))[1]["metadata"]
    assert chain.json("POST", pods_path(ns, "w1", "eviction"),
                      eviction("w1", gracePeriodSeconds=0)) == (201, SUCCESS)
    assert chain.json("GET", pods_path(ns, "w1"))[0] == 404  # deleteOptions passed through
    status = get_pdb(chain, ns, "web")["status"]
    assert status["disruptionsAllowed"] == 0
    assert list(status["disruptedPods"]) == ["w1"]
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("DisruptionAllowed", "False", "InsufficientPods")]
    status, headers, raw = chain.request("POST", pods_path(ns, "w2", "eviction"), eviction("w2"))
    assert status == 429 and "retry-after" not in headers
    assert json.loads(raw) == status_of(
        429, "Cannot evict pod as it would violate the pod's disruption budget.", "TooManyRequests",
        {"causes": [{"reason": "DisruptionBudget", "message": "The disruption budget web needs 2 healthy pods "
                                                              "and has 2 currently"}]})
    assert "deletionTimestamp" not in chain.json("GET", pods_path(ns, "w2"))[1]["metadata"]


def test_eviction_refused_until_the_budget_is_processed(chain: ChainHandle, ns: str) -> None:
    make_pdb(chain, ns, "fresh", "fresh", None)  # no status: never processed by a disruption controller
    run_pod(chain, ns, "f1", {"app": "fresh"})
    status, headers, raw = chain.request("POST", pods_path(ns, "f1", "eviction"), eviction("f1"))
    assert (status, headers["retry-after"]) == (429, "10")
    assert json.loads(raw) == status_of(
        429, "Cannot evict pod as it would violate the pod's disruption budget.", "TooManyRequests",
        {"causes": [{"reason": "DisruptionBudget",
                     "message": "The disruption budget fresh is still being processed by the server."}],
         "retryAfterSeconds": 10})


def test_eviction_with_two_budgets_is_kubes_500(chain: ChainHandle, ns: str) -> None:
    make_pdb(chain, ns, "twin-a", "twin", 1)
    make_pdb(chain, ns, "twin-b", "twin", 1)
    run_pod(chain, ns, "t1", {"app": "twin"})
    assert chain.json("POST", pods_path(ns, "t1", "eviction"), eviction("t1")) == (500, status_of(
        500, "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."))


def test_unready_pods_and_the_unhealthy_pod_eviction_policy(chain: ChainHandle, ns: str) -> None:
    # IfHealthyBudget (default): an unready pod goes without spending the budget while the
    # application is healthy (currentHealthy >= desiredHealthy > 0) ...
    make_pdb(chain, ns, "healthy", "healthy", 0, healthy=2, desired=2)
    run_pod(chain, ns, "h1", {"app": "healthy"}, ready=False)
    assert chain.json("POST", pods_path(ns, "h1", "eviction"), eviction("h1")) == (201, SUCCESS)
    assert get_pdb(chain, ns, "healthy")["status"]["disruptionsAllowed"] == 0
    # ... and not when it is not.
    make_pdb(chain, ns, "sick", "sick", 0, healthy=1, desired=2)
    run_pod(chain, ns, "s1", {"app": "sick"}, ready=False)
    assert chain.json("POST", pods_path(ns, "s1", "eviction"), eviction("s1"))[0] == 429
    # AlwaysAllow: an unready pod always goes.
    make_pdb(chain, ns, "lenient", "lenient", 0, healthy=1, desired=2, policy="AlwaysAllow")
    run_pod(chain, ns, "l1", {"app": "lenient"}, ready=False)
    assert chain.json("POST", pods_path(ns, "l1", "eviction"), eviction("l1")) == (201, SUCCESS)


def test_eviction_bad_inputs(chain: ChainHandle, ns: str) -> None:
    run_pod(chain, ns, "x1", {"app": "x"})
    url = pods_path(ns, "x1", "eviction")
    assert chain.json("POST", url, eviction("other")) == (
        400, status_of(400, "name in URL does not match name in Eviction object", "BadRequest"))
    status, body = chain.json("POST", url, {**eviction("x1"), "apiVersion": "v1"})
    assert (status, body["message"]) == (
        400, "the API version in the data (v1) does not match the expected API version (policy/v1)")
    assert chain.json("POST", pods_path(ns, "nope", "eviction"), eviction("nope"))[0] == 404
    status, body = chain.json("POST", url, eviction("x1", propagationPolicy="Sideways"))
    assert (status, body["reason"]) == (422, "Invalid")
    assert "propagationPolicy: Unsupported value: \"Sideways\"" in body["message"]
    status, body = chain.json("POST", url, eviction("x1", preconditions={"uid": "not-the-uid"}))
    assert (status, body["reason"]) == (409, "Conflict")
    make_pdb(chain, ns, "negative", "x", -1)
    assert chain.json("POST", url, eviction("x1")) == (403, status_of(
        403, 'poddisruptionbudget.policy "negative" is forbidden: pdb disruptions allowed is negative', "Forbidden",
        {"name": "negative", "group": "policy", "kind": "poddisruptionbudget"}))
    status, body = chain.json("GET", url)
    assert (status, body["reason"]) == (405, "MethodNotAllowed")


# --------------------------------------------------------------------------- authorization


@pytest.mark.parametrize("version", KUBECTLS)
def test_kubectl_auth_can_i(chain: ChainHandle, version: str) -> None:
    assert chain.kubectl("auth", "can-i", "create", "pods", version=version).stdout.strip() == "yes"
    assert chain.kubectl("auth", "can-i", "get", "/healthz", version=version).stdout.strip() == "yes"
    # RBAC (kubechain up's default): someone without bindings may not; the admin's rules are
    # cluster-admin's (system:masters) and the defaults every authenticated user has.
    assert chain.kubectl("auth", "can-i", "delete", "nodes", "--as", "someone", version=version,
                         check=False).stdout.strip() == "no"
    listed = chain.kubectl("auth", "can-i", "--list", version=version).stdout.splitlines()
    assert listed[0].split() == ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]
    assert listed[1].split() == ["*.*", "[]", "[]", "[*]"]
    assert ["[*]", "[]", "[*]"] in [line.split() for line in listed]
    assert ["selfsubjectaccessreviews.authorization.k8s.io", "[]", "[]", "[create]"] in \
        [line.split() for line in listed]


AUTHZ = "/apis/authorization.k8s.io/v1"


def test_access_reviews_over_http(chain: ChainHandle) -> None:
    ssar = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": "list", "resource": "secrets", "namespace": "default"}}}
    assert chain.json("POST", f"{AUTHZ}/selfsubjectaccessreviews", ssar) == (201, {
        **ssar, "metadata": {"creationTimestamp": None}, "status": {"allowed": True}})
    sar = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
           "spec": {"user": "alice", "groups": ["devs"], "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}}
    assert chain.json("POST", f"{AUTHZ}/subjectaccessreviews", sar) == (201, {
        **sar, "metadata": {"creationTimestamp": None}, "status": {"allowed": False}})  # RBAC: no binding
    lsar = {"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
            "metadata": {"namespace": "default"},
            "spec": {"user": "bob", "resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "default"}}}
    assert chain.json("POST", f"{AUTHZ}/namespaces/default/localsubjectaccessreviews", lsar) == (201, {
        **lsar, "metadata": {"namespace": "default", "creationTimestamp": None}, "status": {"allowed": False}})
    ssrr = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
            "spec": {"namespace": "default"}}
    status, rules = chain.json("POST", f"{AUTHZ}/selfsubjectrulesreviews", ssrr)
    assert status == 201 and rules["kind"] == "SelfSubjectRulesReview" and rules["spec"] == {}
    assert rules["status"]["resourceRules"][0] == {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}
    assert {"verbs": ["*"], "nonResourceURLs": ["*"]} in rules["status"]["nonResourceRules"]
    assert rules["status"]["incomplete"] is False
    status, body = chain.json("GET", f"{AUTHZ}/subjectaccessreviews")
    assert (status, body["reason"]) == (405, "MethodNotAllowed")


def _invalid(kind: str, causes: list[tuple[str, str]]) -> dict[str, Any]:
    messages = [f"{field}: {message}" for field, message in causes]
    joined = messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"
    return status_of(422, f'{kind}.authorization.k8s.io "" is invalid: {joined}', "Invalid",
                     {"group": "authorization.k8s.io", "kind": kind,
                      "causes": [{"reason": "FieldValueInvalid", "message": message, "field": field}
                                 for field, message in causes]})


def test_access_review_bad_inputs(chain: ChainHandle) -> None:
    empty = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {}}
    one_of = "exactly one of nonResourceAttributes or resourceAttributes must be specified"
    assert chain.json("POST", f"{AUTHZ}/selfsubjectaccessreviews", empty) == (422, _invalid(
        "SelfSubjectAccessReview", [("spec.resourceAttributes", f'Invalid value: "null": {one_of}')]))
    both = {**empty, "spec": {"resourceAttributes": {"verb": "get"},
                              "nonResourceAttributes": {"path": "/x", "verb": "get"}}}
    assert chain.json("POST", f"{AUTHZ}/selfsubjectaccessreviews", both) == (422, _invalid(
        "SelfSubjectAccessReview", [("spec.nonResourceAttributes",
                                     'Invalid value: authorization.NonResourceAttributes{Path:"/x", Verb:"get"}: '
                                     "cannot be specified in combination with resourceAttributes")]))
    nobody = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}}
    assert chain.json("POST", f"{AUTHZ}/subjectaccessreviews", nobody) == (422, _invalid(
        "SubjectAccessReview", [("spec.user", 'Invalid value: "": at least one of user or group must be specified')]))
    named = {**nobody, "metadata": {"name": "x"}, "spec": {**nobody["spec"], "user": "u"}}
    status, body = chain.json("POST", f"{AUTHZ}/subjectaccessreviews", named)
    assert (status, body["details"]["causes"][0]["field"]) == (422, "metadata")
    assert body["details"]["causes"][0]["message"].startswith('Invalid value: v1.ObjectMeta{Name:"x", ')
    assert body["details"]["causes"][0]["message"].endswith(": must be empty")
    lsar = {"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
            "spec": {"user": "u", "resourceAttributes": {"verb": "get", "namespace": "other"}}}
    assert chain.json("POST", f"{AUTHZ}/namespaces/default/localsubjectaccessreviews", lsar) == (422, _invalid(
        "LocalSubjectAccessReview",
        [("spec.resourceAttributes.namespace", 'Invalid value: "other": must match metadata.namespace')]))
    moved = {**lsar, "metadata": {"namespace": "other"}}
    assert chain.json("POST", f"{AUTHZ}/namespaces/default/localsubjectaccessreviews", moved) == (400, status_of(
        400, "the namespace of the provided object does not match the namespace sent on the request", "BadRequest"))
    ssrr = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {}}
    assert chain.json("POST", f"{AUTHZ}/selfsubjectrulesreviews", ssrr) == (
        400, status_of(400, "no namespace on request", "BadRequest"))
    selector = {**empty, "spec": {"resourceAttributes": {"verb": "list", "resource": "pods",
                                                         "labelSelector": {}}}}
    status, body = chain.json("POST", f"{AUTHZ}/selfsubjectaccessreviews", selector)
    assert (status, body["message"]) == (422, 'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: '
                                              "spec.resourceAttributes.labelSelector.requirements: Required value: "
                                              "when spec.resourceAttributes.labelSelector is specified, "
                                              "requirements or rawSelector is required")


# --------------------------------------------------------------------------- OpenAPI


def test_openapi_describes_the_operations(chain: ChainHandle) -> None:
    _, core = chain.json("GET", "/openapi/v3/api/v1")
    eviction_path = core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/eviction"]
    assert set(eviction_path) == {"post", "parameters"}
    post = eviction_path["post"]
    assert post["operationId"] == "createCoreV1NamespacedPodEviction"
    assert post["description"] == "create eviction of a Pod"
    assert post["x-kubernetes-group-version-kind"] == {"group": "policy", "version": "v1", "kind": "Eviction"}
    assert "io.k8s.api.policy.v1.Eviction" in json.dumps(post["requestBody"])
    binding_post = core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/binding"]["post"]
    assert binding_post["operationId"] == "createCoreV1NamespacedPodBinding"
    assert core["paths"]["/api/v1/namespaces/{namespace}/bindings"]["post"]["operationId"] == \
        "createCoreV1NamespacedBinding"
    assert set(core["paths"]["/api/v1/componentstatuses/{name}"]) == {"get", "parameters"}
    _, authz = chain.json("GET", "/openapi/v3/apis/authorization.k8s.io/v1")
    assert authz["paths"]["/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"]["post"]["operationId"] == \
        "createAuthorizationV1SelfSubjectAccessReview"
    assert "io.k8s.api.authorization.v1.SubjectAccessReviewList" not in authz["components"]["schemas"]


# --------------------------------------------------------------------------- Python client


def test_python_client(chain: ChainHandle, ns: str) -> None:
    from kubernetes import client, config
    from kubernetes.client.rest import ApiException

    api_client = config.new_client_from_config(config_file=chain.kubeconfig)
    core, authz = client.CoreV1Api(api_client), client.AuthorizationV1Api(api_client)
    listed = core.list_component_status()
    assert {cs.metadata.name: cs.conditions[0].status for cs in listed.items} == {
        "etcd-0": "True", "scheduler": "False", "controller-manager": "False"}
    make_pod(chain, ns, "py1")
    target = client.V1ObjectReference(kind="Node", name="node-3")
    body = client.V1Binding(metadata=client.V1ObjectMeta(name="py1"), target=target)
    # The client cannot read the Status answer as a V1Binding (as against kube): read it raw.
    resp = core.create_namespaced_pod_binding("py1", ns, body, _preload_content=False)
    assert (resp.status, json.loads(resp.data)) == (201, SUCCESS)
    assert core.read_namespaced_pod("py1", ns).spec.node_name == "node-3"
    evicted = core.create_namespaced_pod_eviction(
        "py1", ns, client.V1Eviction(metadata=client.V1ObjectMeta(name="py1"),
                                     delete_options=client.V1DeleteOptions(grace_period_seconds=0)))
    assert evicted.metadata is not None
    try:
        core.read_namespaced_pod("py1", ns)
        raise AssertionError("the pod is still there")
    except ApiException as err:
        assert err.status == 404
    review = client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec(
        resource_attributes=client.V1ResourceAttributes(verb="create", resource="pods", namespace=ns)))
    assert authz.create_self_subject_access_review(review).status.allowed is True
    rules = authz.create_self_subject_rules_review(
        client.V1SelfSubjectRulesReview(spec=client.V1SelfSubjectRulesReviewSpec(namespace=ns)))
    assert rules.status.resource_rules[0].verbs == ["*"]  # cluster-admin's, then the defaults
    try:
        authz.create_subject_access_review(client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
            resource_attributes=client.V1ResourceAttributes(verb="get"))))
        raise AssertionError("a review without a user was accepted")
    except ApiException as err:
        assert err.status == 422 and json.loads(err.body)["reason"] == "Invalid"


@pytest.mark.parametrize("version", KUBECTLS)
def test_kubectl_drain_honours_the_budget(chain: ChainHandle, ns: str, version: str) -> None:
    """``kubectl drain`` evicts through pods/eviction: one pod goes, the budget keeps the other."""
    tag = version.replace(".", "")
    node = f"drain-{tag}"
    assert chain.json("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                                "metadata": {"name": node}})[0] == 201
    for i in (1, 2):
        make_pod(chain, ns, f"d{tag}-{i}", {"app": f"d{tag}"}, nodeName=node)
        _, pod = chain.json("GET", pods_path(ns, f"d{tag}-{i}"))
        pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": None,
                                                             "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        assert chain.json("PUT", pods_path(ns, f"d{tag}-{i}", "status"), pod)[0] == 200
    make_pdb(chain, ns, f"d{tag}", f"d{tag}", 1, healthy=2, desired=1)
    proc = chain.kubectl("drain", node, "--force", "--grace-period=0", "--timeout=3s", version=version,
                         check=False, timeout=60)
    assert proc.returncode != 0
    assert "Cannot evict pod as it would violate the pod's disruption budget." in proc.stderr
    _, pods = chain.json("GET", pods_path(ns) + f"?labelSelector=app%3Dd{tag}")
    assert len(pods["items"]) == 1
    status = get_pdb(chain, ns, f"d{tag}")["status"]
    assert status["disruptionsAllowed"] == 0 and len(status["disruptedPods"]) == 1
    _, cordoned = chain.json("GET", f"/api/v1/nodes/{node}")
    assert cordoned["spec"]["unschedulable"] is True
