"""The managedFields a create records, byte for byte as kube-apiserver records them.

kube compares a create against the kind's empty Go object (apimachinery's ToUnstructured of
``New()``): a field gets its own ``.`` entry when that object lacks it and something lies below
it (``f:labels``, a new list item, a pointer struct such as ``rollingUpdate``), never for value
structs (``spec``, ``template``, ``strategy``) or fields without ``omitempty`` (``containers``).
What admission and the strategy's PrepareForCreate add later belongs to nobody (a Pod's
ServiceAccount, a Namespace's ``kubernetes`` finalizer). The expected sets are those real
clusters show for the same kubectl commands (kubectl 1.33; 1.33 defaults such as Service
``internalTrafficPolicy`` owned by the creator, atomic Service ``selector``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.procs import ChainHandle

pytestmark = pytest.mark.integration

NS = "mf-create"


@pytest.fixture(scope="module", autouse=True)
def namespace(chain: ChainHandle) -> None:
    chain.kubectl("create", "namespace", NS, check=False)


def entry(chain: ChainHandle, resource: str, namespaced: bool = True) -> dict[str, Any]:
    args = ["get", resource, "-o", "json", "--show-managed-fields"] + (["-n", NS] if namespaced else [])
    obj = json.loads(chain.kubectl(*args, version="1.33").stdout)
    [only] = obj["metadata"]["managedFields"]
    return dict(only)


CONTAINER = {".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {}, "f:resources": {},
             "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {}}
POD_SPEC = {"f:dnsPolicy": {}, "f:restartPolicy": {}, "f:schedulerName": {}, "f:securityContext": {},
            "f:terminationGracePeriodSeconds": {}}


def test_kubectl_create_deployment(chain: ChainHandle) -> None:
    chain.kubectl("create", "-n", NS, "deployment", "hello-world", "--image=gcr.io/hello-app:1.0", version="1.33")
    got = entry(chain, "deployment/hello-world")
    assert (got["manager"], got["operation"], got["apiVersion"]) == ("kubectl-create", "Update", "apps/v1")
    assert got["fieldsV1"] == {
        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
        "f:spec": {"f:progressDeadlineSeconds": {}, "f:replicas": {}, "f:revisionHistoryLimit": {},
                   "f:selector": {},
                   "f:strategy": {"f:rollingUpdate": {".": {}, "f:maxSurge": {}, "f:maxUnavailable": {}},
                                  "f:type": {}},
                   "f:template": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                                  "f:spec": {"f:containers": {'k:{"name":"hello-app"}': CONTAINER}, **POD_SPEC}}}}


def test_kubectl_run_pod_owns_nothing_admission_added(chain: ChainHandle) -> None:
    chain.kubectl("run", "-n", NS, "nginx", "--image=nginx", version="1.33")
    got = entry(chain, "pod/nginx")
    assert got["manager"] == "kubectl-run"
    assert got["fieldsV1"] == {
        "f:metadata": {"f:labels": {".": {}, "f:run": {}}},
        "f:spec": {"f:containers": {'k:{"name":"nginx"}': CONTAINER}, "f:enableServiceLinks": {}, **POD_SPEC}}
    pod = json.loads(chain.kubectl("get", "-n", NS, "pod/nginx", "-o", "json").stdout)
    assert pod["spec"]["serviceAccountName"] == "default"  # there, but nobody's


def test_kubectl_create_namespace_secret_configmap(chain: ChainHandle) -> None:
    chain.kubectl("create", "namespace", "mf-create-ns", version="1.33")
    assert entry(chain, "namespace/mf-create-ns", namespaced=False)["fieldsV1"] == {
        "f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/metadata.name": {}}}}
    chain.kubectl("create", "-n", NS, "secret", "generic", "basic-auth", "--from-literal=auth=x", version="1.33")
    assert entry(chain, "secret/basic-auth")["fieldsV1"] == {"f:data": {".": {}, "f:auth": {}}, "f:type": {}}
    chain.kubectl("create", "-n", NS, "configmap", "redis-conf", "--from-literal=redis.conf=x", version="1.33")
    assert entry(chain, "configmap/redis-conf")["fieldsV1"] == {"f:data": {".": {}, "f:redis.conf": {}}}


def test_kubectl_expose_service(chain: ChainHandle) -> None:
    chain.kubectl("create", "-n", NS, "deployment", "web", "--image=nginx", version="1.33")
    chain.kubectl("expose", "-n", NS, "deployment", "web", "--port=80", version="1.33")
    got = entry(chain, "service/web")
    assert got["manager"] == "kubectl-expose"
    assert got["fieldsV1"] == {
        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
        "f:spec": {"f:internalTrafficPolicy": {},
                   "f:ports": {".": {}, 'k:{"port":80,"protocol":"TCP"}': {
                       ".": {}, "f:port": {}, "f:protocol": {}, "f:targetPort": {}}},
                   "f:selector": {}, "f:sessionAffinity": {}, "f:type": {}}}


def test_hpa_scale_target_ref_is_a_value_struct(chain: ChainHandle) -> None:
    chain.kubectl("create", "-n", NS, "deployment", "scaled", "--image=nginx", version="1.33")
    chain.kubectl("autoscale", "-n", NS, "deployment", "scaled", "--max=10", "--cpu-percent=10", version="1.33")
    got = entry(chain, "hpa/scaled")
    assert (got["manager"], got["apiVersion"]) == ("kubectl-autoscale", "autoscaling/v2")
    assert got["fieldsV1"] == {"f:spec": {"f:maxReplicas": {}, "f:metrics": {}, "f:minReplicas": {},
                                          "f:scaleTargetRef": {"f:apiVersion": {}, "f:kind": {}, "f:name": {}}}}
