"""Strategic merge patch on real Deployment shapes, and JSON merge patch."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from genericapi.apimachinery.schemas import PatchSchema, SchemaCatalog
from genericapi.apimachinery.strategicpatch import (
    StrategicMergePatchError,
    json_merge_patch,
    strategic_merge_patch,
)


@pytest.fixture(scope="module")
def deployment_schema() -> PatchSchema:
    return SchemaCatalog.load().patch_schema("apps", "v1", "Deployment")


def _deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web", "tier": "front"},
                     "finalizers": ["a.example.com/x", "b.example.com/y"]},
        "spec": {
            "replicas": 2,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {"spec": {
                "containers": [
                    {"name": "nginx", "image": "nginx:1.0",
                     "env": [{"name": "A", "value": "1"}],
                     "ports": [{"containerPort": 80, "protocol": "TCP"}]},
                    {"name": "sidecar", "image": "envoy:1"},
                ],
                "volumes": [{"name": "data", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "c"}}],
                "tolerations": [{"key": "k1", "operator": "Exists"}],
            }},
        },
    }


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["template"]["spec"]


def test_containers_merge_by_name_and_env_by_name(deployment_schema: PatchSchema) -> None:
    original = _deployment()
    snapshot = copy.deepcopy(original)
    patch = {"spec": {"template": {"spec": {"containers": [
        {"name": "nginx", "image": "nginx:1.1",
         "env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]},
    ]}}}}
    result = strategic_merge_patch(original, patch, deployment_schema)
    containers = _pod_spec(result)["containers"]
    assert [c["name"] for c in containers] == ["nginx", "sidecar"]
    assert containers[0]["image"] == "nginx:1.1"
    assert containers[0]["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert containers[0]["env"] == [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]
    assert original == snapshot  # inputs untouched


def test_ports_merge_by_container_port(deployment_schema: PatchSchema) -> None:
    patch = {"spec": {"template": {"spec": {"containers": [
        {"name": "nginx", "ports": [{"containerPort": 443, "protocol": "TCP"},
                                    {"containerPort": 80, "name": "http"}]}]}}}}
    result = strategic_merge_patch(_deployment(), patch, deployment_schema)
    ports = _pod_spec(result)["containers"][0]["ports"]
    assert {"containerPort": 80, "protocol": "TCP", "name": "http"} in ports
    assert {"containerPort": 443, "protocol": "TCP"} in ports
    assert len(ports) == 2


def test_new_items_without_order_come_before_server_items(deployment_schema: PatchSchema) -> None:
    patch = {"spec": {"template": {"spec": {"volumes": [{"name": "new", "emptyDir": {}}]}}}}
    result = strategic_merge_patch(_deployment(), patch, deployment_schema)
    assert [v["name"] for v in _pod_spec(result)["volumes"]] == ["new", "data", "cfg"]


def test_set_element_order(deployment_schema: PatchSchema) -> None:
    patch = {"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "extra"}, {"name": "nginx"}],
        "containers": [{"name": "extra", "image": "busybox"}],
    }}}}
    result = strategic_merge_patch(_deployment(), patch, deployment_schema)
    assert [c["name"] for c in _pod_spec(result)["containers"]] == ["sidecar", "extra", "nginx"]
    assert "$setElementOrder/containers" not in _pod_spec(result)


def test_set_element_order_mismatch_is_an_error(deployment_schema: PatchSchema) -> None:
    patch = {"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "nginx"}],
        "containers": [{"name": "other", "image": "x"}],
    }}}}
    with pytest.raises(StrategicMergePatchError) as info:
        strategic_merge_patch(_deployment(), patch, deployment_schema)
    assert "doesn't match $setElementOrder list" in info.value.message
    assert info.value.to_api_error().code == 500


def test_retain_keys_on_strategy(deployment_schema: PatchSchema) -> None:
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": None}}}
    result = strategic_merge_patch(_deployment(), patch, deployment_schema)
    assert result["spec"]["strategy"] == {"type": "Recreate"}


def test_retain_keys_on_volume_source(deployment_schema: PatchSchema) -> None:
    patch = {"spec": {"template": {"spec": {"volumes": [
        {"name": "data", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/tmp"}}]}}}}
    result = strategic_merge_patch(_deployment(), patch, deployment_schema)
    data = next(v for v in _pod_spec(result)["volumes"] if v["name"] == "data")
    assert data == {"name": "data", "hostPath": {"path": "/tmp"}}


def test_retain_keys_must_cover_patch(deployment_schema: PatchSchema) -> None:
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {"maxSurge": 2}}}}
    with pytest.raises(StrategicMergePatchError) as info:
        strategic_merge_patch(_deployment(), patch, deployment_schema)
    error = info.value.to_api_error()
    assert (error.code, error.message) == (400, "invalid patch format of retainKeys")


def test_delete_container_with_patch_directive(deployment_schema: PatchSchema) -> None:
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}}}
    result = strategic_merge_patch(_deployment(), patch, deployment_schema)
    assert [c["name"] for c in _pod_spec(result)["containers"]] == ["nginx"]


def test_replace_list_with_patch_directive(deployment_schema: PatchSchema) -> None:
    patch = {"spec": {"template": {"spec": {"containers": [
        {"name": "only", "image": "x"}, {"$patch": "replace"}]}}}}
    result = strategic_merge_patch(_deployment(), patch, deployment_schema)
    assert _pod_spec(result)["containers"] == [{"name": "only", "image": "x"}]


def test_replace_and_delete_map_directives(deployment_schema: PatchSchema) -> None:
    replaced = strategic_merge_patch(
        _deployment(), {"spec": {"strategy": {"$patch": "replace", "type": "Recreate"}}}, deployment_schema)
    assert replaced["spec"]["strategy"] == {"type": "Recreate"}
    deleted = strategic_merge_patch(
        _deployment(), {"metadata": {"labels": {"$patch": "delete"}}}, deployment_schema)
    assert deleted["metadata"]["labels"] == {}


def test_unknown_directive_is_rejected(deployment_schema: PatchSchema) -> None:
    with pytest.raises(StrategicMergePatchError) as info:
        strategic_merge_patch(_deployment(), {"spec": {"strategy": {"$patch": "frobnicate"}}},
                              deployment_schema)
    assert info.value.message == "unknown patch type: frobnicate in map: map[$patch:frobnicate]"
    with pytest.raises(StrategicMergePatchError, match="merging lists cannot yet be specified"):
        strategic_merge_patch(_deployment(), {"spec": {"template": {"spec": {"containers": [
            {"$patch": "merge"}]}}}}, deployment_schema)


def test_missing_merge_key(deployment_schema: PatchSchema) -> None:
    patch = {"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}
    with pytest.raises(StrategicMergePatchError) as info:
        strategic_merge_patch(_deployment(), patch, deployment_schema)
    assert info.value.message == "map: map[image:x] does not contain declared merge key: name"


def test_finalizers_merge_as_set_and_delete_from_primitive_list(deployment_schema: PatchSchema) -> None:
    added = strategic_merge_patch(
        _deployment(), {"metadata": {"finalizers": ["b.example.com/y", "c.example.com/z"]}},
        deployment_schema)
    assert added["metadata"]["finalizers"] == ["a.example.com/x", "b.example.com/y", "c.example.com/z"]
    removed = strategic_merge_patch(
        _deployment(), {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.example.com/x"]}},
        deployment_schema)
    assert removed["metadata"]["finalizers"] == ["b.example.com/y"]


def test_bad_primitive_list_directive(deployment_schema: PatchSchema) -> None:
    with pytest.raises(StrategicMergePatchError) as info:
        strategic_merge_patch(_deployment(), {"metadata": {"$deleteFromPrimitiveList": ["x"]}},
                              deployment_schema)
    assert info.value.to_api_error().message == "invalid patch format of primitive list"


def test_tolerations_are_atomic(deployment_schema: PatchSchema) -> None:
    patch = {"spec": {"template": {"spec": {"tolerations": [{"key": "k2", "operator": "Exists"}]}}}}
    result = strategic_merge_patch(_deployment(), patch, deployment_schema)
    assert _pod_spec(result)["tolerations"] == [{"key": "k2", "operator": "Exists"}]


def test_labels_null_removes_key(deployment_schema: PatchSchema) -> None:
    result = strategic_merge_patch(
        _deployment(), {"metadata": {"labels": {"tier": None, "env": "prod", "ghost": None}}},
        deployment_schema)
    assert result["metadata"]["labels"] == {"app": "web", "env": "prod"}


def test_kubectl_apply_three_way_patch(deployment_schema: PatchSchema) -> None:
    """The patch kubectl apply computes after bumping the image and editing env in the file."""
    live = _deployment()
    live["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{old}"}
    patch = {
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{new}"},
                     "labels": {"tier": None}},
        "spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "nginx"}],
            "containers": [{
                "$setElementOrder/env": [{"name": "A"}, {"name": "B"}],
                "env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}],
                "image": "nginx:1.1",
                "name": "nginx",
            }],
        }}},
    }
    result = strategic_merge_patch(live, patch, deployment_schema)
    assert result["metadata"]["labels"] == {"app": "web"}
    assert result["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] == "{new}"
    containers = _pod_spec(result)["containers"]
    assert [c["name"] for c in containers] == ["nginx", "sidecar"]  # server-added sidecar kept
    assert containers[0]["env"] == [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]
    assert containers[0]["image"] == "nginx:1.1"
    assert "$setElementOrder/env" not in containers[0]


def test_new_content_drops_nulls(deployment_schema: PatchSchema) -> None:
    result = strategic_merge_patch(
        _deployment(), {"spec": {"selector": {"matchLabels": {"app": "web", "x": None}}}}, deployment_schema)
    assert result["spec"]["selector"] == {"matchLabels": {"app": "web"}}


def test_list_element_type_mismatch(deployment_schema: PatchSchema) -> None:
    with pytest.raises(StrategicMergePatchError, match="list element types are not identical"):
        strategic_merge_patch(_deployment(), {"metadata": {"finalizers": [1]}}, deployment_schema)


def test_schemaless_replaces_lists_and_merges_maps() -> None:
    original = {"spec": {"items": [1, 2], "m": {"a": 1, "b": 2}}}
    patch = {"spec": {"items": [3], "m": {"a": None, "c": 3}}}
    result = strategic_merge_patch(original, patch, PatchSchema.schemaless())
    assert result == {"spec": {"items": [3], "m": {"b": 2, "c": 3}}}


def test_json_merge_patch_rfc7386() -> None:
    original = {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}
    patch = {"a": "z", "c": {"f": None}, "l": [3], "n": {"x": None, "y": 1}}
    assert json_merge_patch(original, patch) == {"a": "z", "c": {"d": "e"}, "l": [3], "n": {"y": 1}}
    assert json_merge_patch({"a": 1}, ["x"]) == ["x"]
    assert json_merge_patch("scalar", {"a": 1}) == {"a": 1}
    assert original["c"] == {"d": "e", "f": "g"}
