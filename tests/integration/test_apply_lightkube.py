"""Server-side apply through lightkube, as its users drive it: ``Client.apply`` of typed models,
generic custom resources and subresources, a multi-document manifest loaded with
``codecs.load_all_yaml``, conflicts raised as ``ApiError`` and taken over with ``force``, and
server dry-run; against the chain ``kubechain up`` starts (the session's ``chain`` fixture).

lightkube sends every apply as ``application/apply-patch+yaml`` with a JSON body and its
``fieldManager``/``force``/``dryRun`` query options, so these tests see the server exactly as
lightkube-based operators (juju charms, for one) do."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.procs import ChainHandle

lightkube = pytest.importorskip("lightkube")
from lightkube import ApiError, Client, KubeConfig, codecs  # noqa: E402
from lightkube.generic_resource import create_namespaced_resource  # noqa: E402
from lightkube.models.apps_v1 import DeploymentSpec, DeploymentStatus  # noqa: E402
from lightkube.models.autoscaling_v1 import ScaleSpec  # noqa: E402
from lightkube.models.core_v1 import Container, EnvVar, PodSpec, PodTemplateSpec  # noqa: E402
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta  # noqa: E402
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition  # noqa: E402
from lightkube.resources.apps_v1 import Deployment  # noqa: E402
from lightkube.resources.apps_v1 import DeploymentScale as DeploymentScaleResource  # noqa: E402
from lightkube.resources.apps_v1 import DeploymentStatus as DeploymentStatusResource  # noqa: E402
from lightkube.resources.core_v1 import ConfigMap, Namespace  # noqa: E402

pytestmark = pytest.mark.integration

NS = "lightkube-apply"
GROUP = "lightkube.example.com"


@pytest.fixture(scope="module")
def lk(chain: ChainHandle) -> Iterator[Client]:
    client = Client(KubeConfig.from_file(chain.kubeconfig), field_manager="lk-operator")
    client.apply(Namespace(metadata=ObjectMeta(name=NS)))
    yield client
    client.delete(Namespace, NS)


def deployment(name: str, *, replicas: int | None = 1, image: str = "nginx:1.25",
               env: dict[str, str] | None = None) -> Deployment:
    container = Container(name="web", image=image,
                          env=[EnvVar(name=k, value=v) for k, v in (env or {}).items()] or None)
    return Deployment(
        metadata=ObjectMeta(name=name, namespace=NS),
        spec=DeploymentSpec(replicas=replicas, selector=LabelSelector(matchLabels={"app": name}),
                            template=PodTemplateSpec(metadata=ObjectMeta(labels={"app": name}),
                                                     spec=PodSpec(containers=[container]))))


def owners(obj: Any) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(e.manager, e.operation, e.subresource or ""): e.fieldsV1 for e in obj.metadata.managedFields or []}


def test_apply_creates_updates_and_removes_what_is_no_longer_applied(lk: Client) -> None:
    created = lk.apply(deployment("web1", env={"A": "1", "B": "2"}))
    assert created.metadata.resourceVersion and created.spec.replicas == 1
    [entry] = created.metadata.managedFields
    assert (entry.manager, entry.operation, entry.apiVersion, entry.fieldsType) == (
        "lk-operator", "Apply", "apps/v1", "FieldsV1")
    web = entry.fieldsV1["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"web"}']
    assert set(web["f:env"]) == {'k:{"name":"A"}', 'k:{"name":"B"}'}
    # The next apply drops env B: the manager owned it, nobody else does, so it goes.
    updated = lk.apply(deployment("web1", image="nginx:1.26", env={"A": "1"}))
    container = updated.spec.template.spec.containers[0]
    assert container.image == "nginx:1.26" and [(e.name, e.value) for e in container.env] == [("A", "1")]
    assert updated.metadata.generation == 2
    # An apply that changes nothing writes nothing.
    again = lk.apply(deployment("web1", image="nginx:1.26", env={"A": "1"}))
    assert again.metadata.resourceVersion == updated.metadata.resourceVersion


def test_conflicts_are_api_errors_until_forced(lk: Client) -> None:
    lk.apply(deployment("web2", replicas=2))
    with pytest.raises(ApiError) as caught:
        lk.apply(deployment("web2", replicas=5, image="nginx:1.26"), field_manager="autoscaler")
    status = caught.value.status
    assert (status.code, status.reason) == (409, "Conflict")
    assert status.message == ('Apply failed with 2 conflicts: conflicts with "lk-operator":\n- .spec.replicas\n'
                              '- .spec.template.spec.containers[name="web"].image')
    assert [(c.reason, c.message, c.field) for c in status.details.causes] == [
        ("FieldManagerConflict", 'conflict with "lk-operator"', ".spec.replicas"),
        ("FieldManagerConflict", 'conflict with "lk-operator"', '.spec.template.spec.containers[name="web"].image')]
    assert lk.get(Deployment, "web2", namespace=NS).spec.replicas == 2
    forced = lk.apply(deployment("web2", replicas=5, image="nginx:1.26"), field_manager="autoscaler", force=True)
    assert forced.spec.replicas == 5
    got = owners(forced)
    assert "f:replicas" not in got[("lk-operator", "Apply", "")]["f:spec"]
    assert got[("autoscaler", "Apply", "")]["f:spec"]["f:replicas"] == {}


def test_two_managers_share_a_config_map(lk: Client) -> None:
    lk.apply(ConfigMap(metadata=ObjectMeta(name="shared", namespace=NS), data={"a": "1", "b": "2"}),
             field_manager="one")
    lk.apply(ConfigMap(metadata=ObjectMeta(name="shared", namespace=NS), data={"b": "2", "c": "3"}),
             field_manager="two")
    # "one" lets go of b, but "two" applies it with the same value: it stays.
    out = lk.apply(ConfigMap(metadata=ObjectMeta(name="shared", namespace=NS), data={"a": "1"}),
                   field_manager="one")
    assert out.data == {"a": "1", "b": "2", "c": "3"}
    got = owners(out)
    assert got[("one", "Apply", "")] == {"f:data": {"f:a": {}}}
    assert got[("two", "Apply", "")] == {"f:data": {"f:b": {}, "f:c": {}}}


def test_status_and_scale_subresources(lk: Client) -> None:
    lk.apply(deployment("web3", replicas=1))
    # (lightkube's models want a spec: None, sent as null, which /status ignores)
    status = DeploymentStatusResource(metadata=ObjectMeta(name="web3", namespace=NS), spec=None,
                                      status=DeploymentStatus(observedGeneration=1, replicas=1, readyReplicas=1))
    # (lightkube takes the namespace of a subresource from its argument, not the object's metadata)
    out = lk.apply(status, namespace=NS, field_manager="controller")
    assert out.status.readyReplicas == 1
    assert owners(out)[("controller", "Apply", "status")] == {
        "f:status": {"f:observedGeneration": {}, "f:readyReplicas": {}, "f:replicas": {}}}
    scale = DeploymentScaleResource(metadata=ObjectMeta(name="web3", namespace=NS), spec=ScaleSpec(replicas=3))
    with pytest.raises(ApiError) as caught:
        lk.apply(scale, namespace=NS, field_manager="hpa")
    assert caught.value.status.message == 'Apply failed with 1 conflict: conflict with "lk-operator": .spec.replicas'
    assert lk.apply(scale, namespace=NS, field_manager="hpa", force=True).spec.replicas == 3
    dep = lk.get(Deployment, "web3", namespace=NS)
    assert dep.spec.replicas == 3
    assert owners(dep)[("hpa", "Apply", "scale")] == {"f:spec": {"f:replicas": {}}}


def test_dry_run_stores_nothing(lk: Client) -> None:
    out = lk.apply(ConfigMap(metadata=ObjectMeta(name="dry", namespace=NS), data={"a": "1"}), dry_run=True)
    assert out.data == {"a": "1"} and out.metadata.uid
    with pytest.raises(ApiError) as caught:
        lk.get(ConfigMap, "dry", namespace=NS)
    assert caught.value.status.code == 404


@pytest.mark.timeout(180)  # lightkube's wait() has no timeout of its own
def test_a_manifest_with_a_custom_resource(lk: Client) -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"routes.{GROUP}"},
           "spec": {"group": GROUP, "scope": "Namespaced",
                    "names": {"plural": "routes", "singular": "route", "kind": "Route", "listKind": "RouteList"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {"type": "object", "properties": {
                            "rules": {"type": "array", "x-kubernetes-list-type": "map",
                                      "x-kubernetes-list-map-keys": ["host", "port"],
                                      "items": {"type": "object", "required": ["host", "port"], "properties": {
                                          "host": {"type": "string"}, "port": {"type": "integer"},
                                          "backend": {"type": "string"}}}}}}}}}}]}}
    for obj in codecs.load_all_yaml(json.dumps(crd)):
        lk.apply(obj)
    lk.wait(CustomResourceDefinition, f"routes.{GROUP}", for_conditions=["Established"])
    route_type = create_namespaced_resource(GROUP, "v1", "Route", "routes")
    manifest = f"""
apiVersion: {GROUP}/v1
kind: Route
metadata: {{name: r1, namespace: {NS}}}
spec:
  rules:
  - {{host: a.example, port: 80, backend: one}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: routes-config, namespace: {NS}}}
data: {{mode: fast}}
"""
    applied = [lk.apply(obj) for obj in codecs.load_all_yaml(manifest)]
    assert [type(o).__name__ for o in applied] == ["Route", "ConfigMap"]
    # Another manager adds a rule beside the first: a list-map keyed by host and port.
    rule = {"apiVersion": f"{GROUP}/v1", "kind": "Route", "metadata": {"name": "r1", "namespace": NS},
            "spec": {"rules": [{"host": "b.example", "port": 80, "backend": "two"}]}}
    out = lk.apply(route_type.from_dict(rule), field_manager="second")
    assert [r["host"] for r in out["spec"]["rules"]] == ["a.example", "b.example"]
    assert owners(out)[("second", "Apply", "")] == {"f:spec": {"f:rules": {'k:{"host":"b.example","port":80}': {
        ".": {}, "f:backend": {}, "f:host": {}, "f:port": {}}}}}
    rule["spec"]["rules"][0] = {"host": "a.example", "port": 80, "backend": "mine"}
    with pytest.raises(ApiError) as caught:
        lk.apply(route_type.from_dict(rule), field_manager="second")
    assert caught.value.status.message == ('Apply failed with 1 conflict: conflict with "lk-operator": '
                                           '.spec.rules[host="a.example",port=80].backend')
    assert lk.get(route_type, "r1", namespace=NS)["spec"]["rules"][0]["backend"] == "one"
    # A field the CRD does not declare fails the apply as kube answers it (500, SMD's message).
    bad = {**rule, "spec": {"rules": [], "colour": "red"}}
    with pytest.raises(ApiError) as caught:
        lk.apply(route_type.from_dict(bad), field_manager="second")
    assert caught.value.status.code == 500
    assert caught.value.status.message == (f"failed to create typed patch object ({NS}/r1; {GROUP}/v1, Kind=Route): "
                                           ".spec.colour: field not declared in schema")
