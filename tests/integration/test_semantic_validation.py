"""Semantic validation through the real chain with real kubectl: kube-apiserver's error text for bad
manifests, and a rejected update leaves the stored object as it was."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.procs import ChainHandle

pytestmark = pytest.mark.integration

NS = "semantic-validation"

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {ns}}}
spec:
  selector: {{matchLabels: {{app: {selector}}}}}
  template:
    metadata: {{labels: {{app: {label}}}}}
    spec:
      containers:
{containers}
"""


def deployment(name: str, containers: str, selector: str = "web", label: str = "web") -> str:
    return DEPLOYMENT.format(name=name, ns=NS, containers=containers, selector=selector, label=label)


@pytest.fixture(scope="module")
def ns(chain: ChainHandle) -> Iterator[str]:
    chain.kubectl("create", "namespace", NS)
    yield NS
    chain.kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=false", check=False)


def rejected(chain: ChainHandle, manifest: str, *args: str) -> str:
    proc = chain.kubectl("apply", "-f", "-", *args, input=manifest, check=False)
    assert proc.returncode != 0, proc.stdout
    return proc.stderr


def get(chain: ChainHandle, *args: str) -> dict[str, Any]:
    return json.loads(chain.kubectl("get", *args, "-n", NS, "-o", "json").stdout)  # type: ignore[no-any-return]


def test_duplicate_container_names(chain: ChainHandle, ns: str) -> None:
    err = rejected(chain, deployment("dup", "      - {name: web, image: nginx}\n      - {name: web, image: redis}"))
    assert 'The Deployment "dup" is invalid: spec.template.spec.containers[1].name: Duplicate value: "web"' in err


def test_missing_image_and_bad_port(chain: ChainHandle, ns: str) -> None:
    err = rejected(chain, deployment("noimage", "      - {name: web, image: ''}"))
    assert 'The Deployment "noimage" is invalid: spec.template.spec.containers[0].image: Required value' in err
    err = rejected(chain, deployment("port", "      - {name: web, image: nginx, ports: [{containerPort: 70000}]}"))
    assert ("spec.template.spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 "
            "and 65535, inclusive") in err


def test_selector_mismatch(chain: ChainHandle, ns: str) -> None:
    err = rejected(chain, deployment("mismatch", "      - {name: web, image: nginx}", label="other"))
    assert ('The Deployment "mismatch" is invalid: spec.template.metadata.labels: Invalid value: '
            'map[string]string{"app":"other"}: `selector` does not match template `labels`') in err


def test_bad_quantity_and_requests_over_limits(chain: ChainHandle, ns: str) -> None:
    err = rejected(chain, deployment("qty", "      - {name: web, image: nginx, resources: {limits: {cpu: 1x}}}"))
    assert ("quantities must match the regular expression "
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'") in err
    err = rejected(chain, deployment("suffix", "      - {name: web, image: nginx, resources: {limits: {cpu: 1iK}}}"))
    assert "unable to parse quantity's suffix" in err
    over = "      - {name: web, image: nginx, resources: {requests: {cpu: '2'}, limits: {cpu: 500m}}}"
    err = rejected(chain, deployment("over", over))
    assert ('spec.template.spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal '
            "to cpu limit of 500m") in err


def test_tls_secret_without_key(chain: ChainHandle, ns: str) -> None:
    manifest = f"""
apiVersion: v1
kind: Secret
metadata: {{name: cert, namespace: {NS}}}
type: kubernetes.io/tls
data: {{tls.crt: eA==}}
"""
    err = rejected(chain, manifest)
    assert 'The Secret "cert" is invalid: data[tls.key]: Required value' in err


def test_rejected_update_leaves_object_unchanged(chain: ChainHandle, ns: str) -> None:
    chain.kubectl("apply", "-f", "-", input=deployment("keep", "      - {name: web, image: nginx}"))
    before = get(chain, "deployment", "keep")
    moved = deployment("keep", "      - {name: web, image: nginx}", selector="web2", label="web2")
    err = rejected(chain, moved)
    assert ('The Deployment "keep" is invalid: spec.selector: Invalid value: v1.LabelSelector{MatchLabels:'
            'map[string]string{"app":"web2"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: '
            "field is immutable") in err
    after = get(chain, "deployment", "keep")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["spec"] == before["spec"]


def test_immutable_config_map_and_service_cluster_ip(chain: ChainHandle, ns: str) -> None:
    cm = f"""
apiVersion: v1
kind: ConfigMap
metadata: {{name: frozen, namespace: {NS}}}
immutable: true
data: {{color: blue}}
"""
    chain.kubectl("apply", "-f", "-", input=cm)
    err = rejected(chain, cm.replace("blue", "green"))
    assert 'The ConfigMap "frozen" is invalid: data: Forbidden: field is immutable when `immutable` is set' in err
    assert get(chain, "configmap", "frozen")["data"] == {"color": "blue"}

    svc = f"""
apiVersion: v1
kind: Service
metadata: {{name: fixed, namespace: {NS}}}
spec:
  clusterIP: None
  selector: {{app: web}}
  ports: [{{port: 80}}]
"""
    chain.kubectl("apply", "-f", "-", input=svc)
    err = rejected(chain, svc.replace("clusterIP: None", "clusterIP: 10.0.0.77"))
    assert "spec.clusterIPs[0]: Invalid value: []string{\"10.0.0.77\"}: may not change once set" in err
    assert get(chain, "service", "fixed")["spec"]["clusterIP"] == "None"


def test_statefulset_spec_update_forbidden(chain: ChainHandle, ns: str) -> None:
    sts = f"""
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: db, namespace: {NS}}}
spec:
  serviceName: db
  selector: {{matchLabels: {{app: db}}}}
  template:
    metadata: {{labels: {{app: db}}}}
    spec: {{containers: [{{name: db, image: postgres}}]}}
"""
    chain.kubectl("apply", "-f", "-", input=sts)
    err = rejected(chain, sts.replace("serviceName: db", "serviceName: other"))
    assert ("spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', "
            "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are "
            "forbidden") in err
    chain.kubectl("scale", "statefulset", "db", "-n", NS, "--replicas=3")
    assert get(chain, "statefulset", "db")["spec"]["replicas"] == 3


def test_status_causes_over_http(chain: ChainHandle, ns: str) -> None:
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "twins"},
            "spec": {"containers": [{"name": "a", "image": "nginx"}, {"name": "a", "image": "nginx"}]}}
    status, out = chain.json("POST", f"/api/v1/namespaces/{NS}/pods", body)
    assert status == 422
    assert out["reason"] == "Invalid"
    assert out["details"]["causes"] == [
        {"reason": "FieldValueDuplicate", "message": 'Duplicate value: "a"', "field": "spec.containers[1].name"}]
