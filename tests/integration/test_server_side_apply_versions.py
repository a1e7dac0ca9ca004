"""Field ownership across API versions, as kube's fieldmanager converts it (its versionConverter):
each managedFields entry keeps its apiVersion and is compared in it, so appliers of
autoscaling/v1 and autoscaling/v2 HPAs (or of two versions of a CRD) conflict on the same
field with kube's message, the paths written in the other manager's version."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from support.procs import ChainHandle

pytestmark = pytest.mark.integration

NS = "ssa-versions"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
HPA_V1 = f"/apis/autoscaling/v1/namespaces/{NS}/horizontalpodautoscalers"
HPA_V2 = f"/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers"


@pytest.fixture(scope="module", autouse=True)
def namespace(chain: ChainHandle) -> None:
    chain.kubectl("create", "namespace", NS, check=False)


def apply(chain: ChainHandle, path: str, body: Any, query: str) -> tuple[int, Any]:
    status, _h, out = chain.request("PATCH", f"{path}?{query}", raw=yaml.safe_dump(body).encode(), headers=APPLY)
    return status, json.loads(out) if out else None


def entries(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e for e in obj["metadata"].get("managedFields") or []}


def hpa_v2(name: str, max_replicas: int, cpu: int | None = 50) -> dict[str, Any]:
    spec: dict[str, Any] = {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                            "minReplicas": 1, "maxReplicas": max_replicas}
    if cpu is not None:
        spec["metrics"] = [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": cpu}}}]
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": NS}, "spec": spec}


def hpa_v1(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, **spec}}


def test_kubectl_applies_v2_then_v1_hpa_conflicts_across_versions(chain: ChainHandle, tmp_path: Any) -> None:
    manifest = tmp_path / "hpa.yaml"
    manifest.write_text(yaml.safe_dump(hpa_v2("h1", 5)))
    out = chain.kubectl("apply", "--server-side", "--field-manager=team-v2", "-f", str(manifest), version="1.33")
    assert "serverside-applied" in out.stdout
    # An autoscaling/v1 applier changing maxReplicas and the CPU target conflicts with the
    # v2 applier; the paths are the v2 manager's (v1's targetCPUUtilizationPercentage is v2's metrics).
    status, body = apply(chain, f"{HPA_V1}/h1", hpa_v1("h1", maxReplicas=7, targetCPUUtilizationPercentage=60),
                         "fieldManager=team-v1")
    assert status == 409, body
    assert body["reason"] == "Conflict"
    assert body["message"] == ('Apply failed with 2 conflicts: conflicts with "team-v2":\n'
                               "- .spec.maxReplicas\n- .spec.metrics")
    assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == [
        (".spec.maxReplicas", 'conflict with "team-v2"'), (".spec.metrics", 'conflict with "team-v2"')]
    # Applying the same values through v1 is no conflict (the converted objects do not differ).
    status, obj = apply(chain, f"{HPA_V1}/h1", hpa_v1("h1", maxReplicas=5), "fieldManager=shared")
    assert status == 200, obj
    got = entries(obj)
    assert got[("shared", "Apply")]["apiVersion"] == "autoscaling/v1"
    # (v1's CrossVersionObjectReference is an atomic struct)
    assert got[("shared", "Apply")]["fieldsV1"] == {"f:spec": {"f:maxReplicas": {}, "f:scaleTargetRef": {}}}
    assert got[("team-v2", "Apply")]["apiVersion"] == "autoscaling/v2"
    # Forced: team-v2 loses what changed in its own version, team-v1 owns the v1 fields.
    status, obj = apply(chain, f"{HPA_V1}/h1", hpa_v1("h1", maxReplicas=7, targetCPUUtilizationPercentage=60),
                        "fieldManager=team-v1&force=true")
    assert status == 200, obj
    assert obj["spec"]["maxReplicas"] == 7 and obj["spec"]["targetCPUUtilizationPercentage"] == 60
    got = entries(obj)
    assert got[("team-v1", "Apply")]["apiVersion"] == "autoscaling/v1"
    v2_spec = got[("team-v2", "Apply")]["fieldsV1"]["f:spec"]
    assert "f:maxReplicas" not in v2_spec and "f:metrics" not in v2_spec and "f:minReplicas" in v2_spec
    # The v2 applier applying its manifest again now conflicts with the v1 applier, by v1 paths.
    failed = chain.kubectl("apply", "--server-side", "--field-manager=team-v2", "-f", str(manifest),
                           version="1.33", check=False)
    assert failed.returncode != 0
    assert 'conflicts with "team-v1":' in failed.stderr
    assert "- .spec.maxReplicas" in failed.stderr and "- .spec.targetCPUUtilizationPercentage" in failed.stderr
    # Read through v2, the object and its entries are the same ones.
    v2 = json.loads(chain.kubectl("get", "-n", NS, "hpa.v2.autoscaling/h1", "-o", "json", "--show-managed-fields",
                                  version="1.33").stdout)
    assert v2["spec"]["maxReplicas"] == 7
    assert v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 60
    assert {(k, e["apiVersion"]) for k, e in entries(v2).items()} >= {
        (("team-v1", "Apply"), "autoscaling/v1"), (("team-v2", "Apply"), "autoscaling/v2")}


def test_applier_moving_versions_is_pruned_in_its_last_version(chain: ChainHandle) -> None:
    status, obj = apply(chain, f"{HPA_V1}/h2", hpa_v1("h2", minReplicas=2, maxReplicas=4,
                                                      targetCPUUtilizationPercentage=70), "fieldManager=one")
    assert status == 201, obj
    # The same manager moves to autoscaling/v2 and no longer applies minReplicas: its last entry
    # is at v1, so pruning is done in v1 (minReplicas goes, then defaulting gives it 1 again).
    body = hpa_v2("h2", 4, cpu=70)
    del body["spec"]["minReplicas"]
    status, obj = apply(chain, f"{HPA_V2}/h2", body, "fieldManager=one")
    assert status == 200, obj
    assert obj["spec"]["minReplicas"] == 1
    assert obj["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 70
    [entry] = [e for e in obj["metadata"]["managedFields"] if e["manager"] == "one"]
    assert entry["apiVersion"] == "autoscaling/v2" and "f:minReplicas" not in entry["fieldsV1"]["f:spec"]


def test_update_entries_keep_their_version(chain: ChainHandle) -> None:
    status, obj = apply(chain, f"{HPA_V2}/h3", hpa_v2("h3", 3), "fieldManager=applier")
    assert status == 201, obj
    status, _h, raw = chain.request("PATCH", f"{HPA_V1}/h3?fieldManager=editor", raw=b'{"spec":{"maxReplicas":9}}',
                                    headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200, raw
    got = entries(json.loads(raw))
    assert got[("editor", "Update")]["apiVersion"] == "autoscaling/v1"
    assert got[("editor", "Update")]["fieldsV1"] == {"f:spec": {"f:maxReplicas": {}}}
    # The v2 applier lost maxReplicas (changed in its version) and kept the rest.
    assert "f:maxReplicas" not in got[("applier", "Apply")]["fieldsV1"]["f:spec"]
    assert "f:metrics" in got[("applier", "Apply")]["fieldsV1"]["f:spec"]


GROUP = "ssav.example.com"


def widget_crd(conversion: dict[str, Any] | None = None) -> dict[str, Any]:
    def version(name: str, storage: bool, ports: dict[str, Any]) -> dict[str, Any]:
        item = {"type": "object", "required": ["name"],
                "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}
        return {"name": name, "served": True, "storage": storage, "schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"spec": {"type": "object", "properties": {
                "size": {"type": "integer"}, "ports": {"type": "array", "items": item, **ports}}}}}}}

    spec: dict[str, Any] = {
        "group": GROUP, "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        # v1 types ports as an atomic list, v2 as a map keyed by name: ownership differs by version.
        "versions": [version("v1", True, {"x-kubernetes-list-type": "atomic"}),
                     version("v2", False, {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]})]}
    if conversion is not None:
        spec["conversion"] = conversion
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"widgets.{GROUP}"}, "spec": spec}


def widget(version: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{version}", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


def test_crd_versions_with_none_conversion_compare_in_each_entry_version(chain: ChainHandle, tmp_path: Any) -> None:
    chain.kubectl("apply", "-f", "-", input=json.dumps(widget_crd()))
    chain.kubectl("wait", "--for", "condition=Established", f"crd/widgets.{GROUP}", "--timeout=30s")
    v1 = f"/apis/{GROUP}/v1/namespaces/{NS}/widgets"
    v2 = f"/apis/{GROUP}/v2/namespaces/{NS}/widgets"
    manifest = tmp_path / "w.yaml"
    manifest.write_text(yaml.safe_dump({**widget("v1", "w1", size=1, ports=[{"name": "a", "port": 1}]),
                                        "metadata": {"name": "w1", "namespace": NS}}))
    chain.kubectl("apply", "--server-side", "--field-manager=old", "-f", str(manifest), version="1.33")
    # Through v2 the ports are a map: adding one item changes v1's atomic list, owned by "old".
    status, body = apply(chain, f"{v2}/w1", widget("v2", "w1", ports=[{"name": "b", "port": 2}]), "fieldManager=new")
    assert status == 409, body
    assert body["message"] == 'Apply failed with 1 conflict: conflict with "old": .spec.ports'
    status, obj = apply(chain, f"{v2}/w1", widget("v2", "w1", ports=[{"name": "b", "port": 2}]),
                        "fieldManager=new&force=true")
    assert status == 200, obj
    assert obj["spec"]["ports"] == [{"name": "a", "port": 1}, {"name": "b", "port": 2}]
    got = entries(obj)
    assert got[("old", "Apply")]["apiVersion"] == f"{GROUP}/v1"
    assert got[("old", "Apply")]["fieldsV1"] == {"f:spec": {"f:size": {}}}
    assert got[("new", "Apply")]["apiVersion"] == f"{GROUP}/v2"
    assert got[("new", "Apply")]["fieldsV1"] == {"f:spec": {"f:ports": {'k:{"name":"b"}': {
        ".": {}, "f:name": {}, "f:port": {}}}}}
    # A v1 update of size is compared in v1 for "old" and in v2 for "new" (who does not own it).
    status, _h, raw = chain.request("PATCH", f"{v1}/w1?fieldManager=sizer", raw=b'{"spec":{"size":3}}',
                                    headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200, raw
    got = entries(json.loads(raw))
    assert ("old", "Apply") not in got
    assert got[("sizer", "Update")]["fieldsV1"] == {"f:spec": {"f:size": {}}}
    assert got[("new", "Apply")]["fieldsV1"]["f:spec"]["f:ports"]
