"""The Swagger 2.0 document of /openapi/v2: paths, operationIds, parameters, definitions."""

from __future__ import annotations

import functools
import gc
import os
import time
from typing import Any

import kubernetes_validate
import orjson
from genericapi.apimachinery.openapi import build_openapi_v2, clear_openapi_cache
from genericapi.apimachinery.openapi_schema import collect_refs
from genericapi.apimachinery.resources import ResourceInfo


@functools.cache
def builtin_definitions() -> dict[str, Any]:
    path = os.path.join(
        os.path.dirname(kubernetes_validate.__file__),
        "kubernetes-json-schema",
        "v1.33.0-local",
        "_definitions.json",
    )
    with open(path, "rb") as handle:
        return orjson.loads(handle.read())["$defs"]  # type: ignore[no-any-return]


DEPLOYMENTS = ResourceInfo(
    "apps", "v1", "Deployment", "deployments", "deployment", True, subresources=("status", "scale")
)
PODS = ResourceInfo("", "v1", "Pod", "pods", "pod", True, subresources=("status",))
NAMESPACES = ResourceInfo("", "v1", "Namespace", "namespaces", "namespace", False, subresources=("status",))
CLUSTER_ROLES = ResourceInfo(
    "rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", "clusterrole", False
)
CRONTABS = ResourceInfo("stable.example.com", "v1", "CronTab", "crontabs", "crontab", True)
RESOURCES = (DEPLOYMENTS, PODS, NAMESPACES, CLUSTER_ROLES, CRONTABS)


def operation_ids(doc: dict[str, Any]) -> set[str]:
    return {
        op["operationId"]
        for item in doc["paths"].values()
        for method, op in item.items()
        if method != "parameters"
    }


def v2_doc() -> dict[str, Any]:
    return build_openapi_v2(RESOURCES, builtin_definitions())


def test_document_skeleton() -> None:
    doc = build_openapi_v2(RESOURCES, builtin_definitions(), info_version="v1.33.7")
    assert doc["swagger"] == "2.0"
    assert doc["info"] == {"title": "Kubernetes", "version": "v1.33.7"}
    assert doc["securityDefinitions"]["BearerToken"]["type"] == "apiKey"
    assert doc["security"] == [{"BearerToken": []}]
    for name in (
        "Status",
        "DeleteOptions",
        "WatchEvent",
        "ListMeta",
        "ObjectMeta",
        "Patch",
        "APIResourceList",
    ):
        assert "io.k8s.apimachinery.pkg.apis.meta.v1." + name in doc["definitions"]


def test_deployment_operation_ids() -> None:
    ids = operation_ids(v2_doc())
    expected = {
        "listAppsV1NamespacedDeployment",
        "createAppsV1NamespacedDeployment",
        "deleteAppsV1CollectionNamespacedDeployment",
        "readAppsV1NamespacedDeployment",
        "replaceAppsV1NamespacedDeployment",
        "patchAppsV1NamespacedDeployment",
        "deleteAppsV1NamespacedDeployment",
        "readAppsV1NamespacedDeploymentStatus",
        "replaceAppsV1NamespacedDeploymentStatus",
        "patchAppsV1NamespacedDeploymentStatus",
        "readAppsV1NamespacedDeploymentScale",
        "replaceAppsV1NamespacedDeploymentScale",
        "patchAppsV1NamespacedDeploymentScale",
        "listAppsV1DeploymentForAllNamespaces",
        "watchAppsV1NamespacedDeploymentList",
        "watchAppsV1NamespacedDeployment",
        "watchAppsV1DeploymentListForAllNamespaces",
        "getAppsV1APIResources",
    }
    assert expected <= ids


def test_core_and_cluster_scoped_operation_ids() -> None:
    doc = v2_doc()
    ids = operation_ids(doc)
    assert {"listCoreV1NamespacedPod", "readCoreV1NamespacedPodStatus", "getCoreV1APIResources"} <= ids
    assert {"listCoreV1Namespace", "patchCoreV1Namespace", "watchCoreV1NamespaceList"} <= ids
    assert "listCoreV1NamespaceForAllNamespaces" not in ids
    assert "/api/v1/namespaces/{name}" in doc["paths"]
    assert "listRbacAuthorizationV1ClusterRole" in ids
    op = doc["paths"]["/apis/rbac.authorization.k8s.io/v1/clusterroles"]["get"]
    assert op["tags"] == ["rbacAuthorization_v1"]
    assert op["x-kubernetes-group-version-kind"] == {
        "group": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "version": "v1",
    }


def test_patch_operation_shape() -> None:
    item = v2_doc()["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]
    patch = item["patch"]
    assert patch["consumes"] == [
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
    ]
    assert patch["x-kubernetes-action"] == "patch"
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "apps",
        "kind": "Deployment",
        "version": "v1",
    }
    params = {p["name"]: p for p in patch["parameters"]}
    assert params["body"] == {
        "in": "body",
        "name": "body",
        "required": True,
        "schema": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"},
    }
    assert params["fieldValidation"]["in"] == "query"
    assert params["fieldValidation"]["type"] == "string"
    assert params["force"]["type"] == "boolean"
    assert set(params) == {"body", "dryRun", "fieldManager", "fieldValidation", "force"}
    assert patch["responses"]["200"]["schema"] == {"$ref": "#/definitions/io.k8s.api.apps.v1.Deployment"}
    path_params = {p["name"]: p for p in item["parameters"]}
    assert path_params["name"]["in"] == "path" and path_params["name"]["required"] is True
    assert path_params["namespace"]["in"] == "path" and path_params["namespace"]["required"] is True
    assert path_params["pretty"]["in"] == "query"


def test_list_and_delete_collection_parameters() -> None:
    item = v2_doc()["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments"]
    list_params = {p["name"] for p in item["get"]["parameters"]}
    assert {"labelSelector", "fieldSelector", "limit", "continue", "watch", "resourceVersion"} <= list_params
    assert "application/json;stream=watch" in item["get"]["produces"]
    assert item["get"]["x-kubernetes-action"] == "list"
    assert item["get"]["responses"]["200"]["schema"]["$ref"].endswith("apps.v1.DeploymentList")
    delete = item["delete"]
    assert delete["x-kubernetes-action"] == "deletecollection"
    delete_params = {p["name"]: p for p in delete["parameters"]}
    assert "watch" not in delete_params
    assert {"gracePeriodSeconds", "propagationPolicy", "labelSelector"} <= set(delete_params)
    assert "required" not in delete_params["body"]
    assert item["post"]["x-kubernetes-action"] == "post"
    assert {p["name"] for p in item["post"]["parameters"]} == {
        "body",
        "dryRun",
        "fieldManager",
        "fieldValidation",
    }


def test_scale_subresource_uses_autoscaling_scale() -> None:
    item = v2_doc()["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]
    assert set(item) == {"get", "put", "patch", "parameters"}
    for method in ("get", "put", "patch"):
        assert item[method]["x-kubernetes-group-version-kind"] == {
            "group": "autoscaling",
            "kind": "Scale",
            "version": "v1",
        }
        assert (
            item[method]["responses"]["200"]["schema"]["$ref"]
            == "#/definitions/io.k8s.api.autoscaling.v1.Scale"
        )
    assert item["put"]["operationId"] == "replaceAppsV1NamespacedDeploymentScale"


def test_verbs_limit_operations() -> None:
    read_only = ResourceInfo("", "v1", "ComponentStatus", "componentstatuses", "componentstatus", False,
                             verbs=("get", "list"))  # fmt: skip
    doc = build_openapi_v2([read_only], builtin_definitions())
    assert operation_ids(doc) == {
        "getCoreV1APIResources",
        "listCoreV1ComponentStatus",
        "readCoreV1ComponentStatus",
    }
    assert set(doc["paths"]["/api/v1/componentstatuses"]) == {"get", "parameters"}


def test_custom_resource_gets_synthesized_schemas_and_no_strategic_merge() -> None:
    doc = v2_doc()
    assert "com.example.stable.v1.CronTab" in doc["definitions"]
    assert "com.example.stable.v1.CronTabList" in doc["definitions"]
    assert doc["definitions"]["com.example.stable.v1.CronTabList"]["properties"]["items"]["items"] == {
        "$ref": "#/definitions/com.example.stable.v1.CronTab"
    }
    patch = doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}"]["patch"]
    assert patch["operationId"] == "patchStableExampleComV1NamespacedCronTab"
    assert "application/strategic-merge-patch+json" not in patch["consumes"]
    assert "application/apply-patch+yaml" in patch["consumes"]


def test_custom_resource_with_supplied_schema_uses_it() -> None:
    definitions = dict(builtin_definitions())
    definitions["com.example.stable.v1.CronTab"] = {
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"cronSpec": {"type": ["string", "null"]}}}},
        "x-kubernetes-group-version-kind": [
            {"group": "stable.example.com", "kind": "CronTab", "version": "v1"}
        ],
    }
    doc = build_openapi_v2([CRONTABS], definitions)
    spec = doc["definitions"]["com.example.stable.v1.CronTab"]["properties"]["spec"]
    assert spec["properties"]["cronSpec"] == {"type": "string"}


def test_every_reference_resolves() -> None:
    doc = v2_doc()
    refs: set[str] = set()
    collect_refs(doc["paths"], refs)
    collect_refs(doc["definitions"], refs)
    missing = {r for r in refs if r not in doc["definitions"]}
    assert not missing
    raw = orjson.dumps(doc)
    assert b"#/$defs/" not in raw and b"#/components/" not in raw


def supports_query_param_v2(doc: dict[str, Any], gvk: dict[str, str], param: str) -> bool:
    """What kubectl's query param verifier does with a v2 document."""
    for item in doc["paths"].values():
        patch = item.get("patch")
        if patch is None or patch.get("x-kubernetes-group-version-kind") != gvk:
            continue
        return any(p.get("in") == "query" and p.get("name") == param for p in patch.get("parameters", []))
    return False


def test_kubectl_finds_field_validation() -> None:
    doc = v2_doc()
    assert supports_query_param_v2(
        doc, {"group": "apps", "kind": "Deployment", "version": "v1"}, "fieldValidation"
    )
    assert supports_query_param_v2(doc, {"group": "", "kind": "Pod", "version": "v1"}, "fieldValidation")
    assert not supports_query_param_v2(doc, {"group": "apps", "kind": "StatefulSet", "version": "v1"}, "x")


def test_results_are_cached_per_inputs() -> None:
    clear_openapi_cache()
    definitions = builtin_definitions()
    first = build_openapi_v2(RESOURCES, definitions)
    assert build_openapi_v2(list(RESOURCES), definitions) is first
    assert build_openapi_v2(RESOURCES[:2], definitions) is not first
    assert build_openapi_v2(RESOURCES, dict(definitions)) is not first


def test_building_grows_linearly_with_resources() -> None:
    """480 resources (status and scale each, 12 groups) cost less than 5x 120, built-ins included (a
    ratio in one run; never a time limit): linear is about 3x here, quadratic would be about 12x.
    Each size's cost is the least CPU time of this process over 5 cold-cache builds, the sizes
    taking turns so that a busy spell on the machine falls on both alike, with the cycle collector
    paused (a full collection of the whole test process's heap is not the build's cost). Both sizes
    are large next to the built-ins' ~25 ms: with 15 and 60 resources minus a separate built-ins
    build, the few milliseconds being compared varied from run to run by more than themselves."""
    sizes = (120, 480)
    batches = {n: tuple(
        ResourceInfo(f"g{i % 12}.example.com", "v1", f"Kind{i}", f"kind{i}s", f"kind{i}", i % 3 != 0,
                     subresources=("status", "scale"))
        for i in range(n)) for n in sizes}  # fmt: skip
    definitions = builtin_definitions()
    best = dict.fromkeys(sizes, float("inf"))
    doc: dict = {}
    for _ in range(5):
        for n in sizes:
            clear_openapi_cache()
            gc.collect()
            gc.disable()
            try:
                started = time.process_time()
                doc = build_openapi_v2(batches[n], definitions)
                best[n] = min(best[n], time.process_time() - started)
            finally:
                gc.enable()
    assert len(doc["paths"]) > 2000
    assert best[480] < 5 * best[120], best
