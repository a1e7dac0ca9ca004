"""The per-group-version OpenAPI 3.0 documents of /openapi/v3 and their index."""

from __future__ import annotations

import functools
import hashlib
import os
import re
from typing import Any

import kubernetes_validate
import orjson
import pytest
from genericapi.apimachinery.openapi import (
    build_all_openapi_v3,
    build_openapi_v3,
    build_openapi_v3_index,
    clear_openapi_cache,
    openapi_etag,
    openapi_v3_path_key,
    serialize_openapi,
)
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
JOBS = ResourceInfo("batch", "v1", "Job", "jobs", "job", True, subresources=("status",))
CRONTABS = ResourceInfo("stable.example.com", "v1", "CronTab", "crontabs", "crontab", True)
RESOURCES = (DEPLOYMENTS, PODS, JOBS, CRONTABS)


def apps_doc() -> dict[str, Any]:
    return build_openapi_v3("apps", "v1", RESOURCES, builtin_definitions())


def test_document_skeleton_and_paths_of_one_group_version() -> None:
    doc = apps_doc()
    assert doc["openapi"] == "3.0.0"
    assert doc["info"]["title"] == "Kubernetes"
    assert "/apis/apps/v1/" in doc["paths"]
    assert all(path.startswith("/apis/apps/v1/") for path in doc["paths"])
    assert "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale" in doc["paths"]


def test_core_group_document() -> None:
    doc = build_openapi_v3("", "v1", RESOURCES, builtin_definitions())
    assert doc["paths"]["/api/v1/"]["get"]["operationId"] == "getCoreV1APIResources"
    assert "/api/v1/namespaces/{namespace}/pods/{name}/status" in doc["paths"]
    assert not any("deployments" in p for p in doc["paths"])


def test_components_are_the_closure_of_what_paths_reference() -> None:
    doc = apps_doc()
    schemas = doc["components"]["schemas"]
    for name in (
        "io.k8s.api.apps.v1.Deployment",
        "io.k8s.api.apps.v1.DeploymentList",
        "io.k8s.api.autoscaling.v1.Scale",
        "io.k8s.api.core.v1.PodSpec",
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
        "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
        "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
        "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
        "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList",
    ):
        assert name in schemas, name
    assert "io.k8s.api.batch.v1.Job" not in schemas
    refs: set[str] = set()
    collect_refs(doc, refs)
    assert refs <= set(schemas)
    raw = orjson.dumps(doc)
    assert b"#/definitions/" not in raw and b"#/$defs/" not in raw


def test_schemas_use_v3_refs_and_keep_gvk() -> None:
    schemas = apps_doc()["components"]["schemas"]
    deployment = schemas["io.k8s.api.apps.v1.Deployment"]
    assert deployment["x-kubernetes-group-version-kind"] == [
        {"group": "apps", "kind": "Deployment", "version": "v1"}
    ]
    assert deployment["properties"]["spec"]["allOf"] == [
        {"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"}
    ]
    assert deployment["properties"]["apiVersion"]["type"] == "string"
    strategy = schemas["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["strategy"]
    assert strategy["x-kubernetes-patch-strategy"] == "retainKeys"
    assert "nullable" not in orjson.dumps(schemas).decode()


def test_patch_operation_shape() -> None:
    patch = apps_doc()["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "apps",
        "kind": "Deployment",
        "version": "v1",
    }
    assert patch["x-kubernetes-action"] == "patch"
    content = patch["requestBody"]["content"]
    assert set(content) == {
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
    }
    assert content["application/strategic-merge-patch+json"]["schema"] == {
        "$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
    }
    assert patch["requestBody"]["required"] is True
    params = {p["name"]: p for p in patch["parameters"]}
    assert params["fieldValidation"] == {
        "description": params["fieldValidation"]["description"],
        "in": "query",
        "name": "fieldValidation",
        "schema": {"type": "string", "uniqueItems": True},
    }
    ok = patch["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": "#/components/schemas/io.k8s.api.apps.v1.Deployment"}


def test_custom_resource_patch_has_no_strategic_merge() -> None:
    doc = build_openapi_v3("stable.example.com", "v1", RESOURCES, builtin_definitions())
    patch = doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}"]["patch"]
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    assert "com.example.stable.v1.CronTab" in doc["components"]["schemas"]
    assert doc["components"]["schemas"]["com.example.stable.v1.CronTabList"]["properties"]["items"][
        "items"
    ] == {"$ref": "#/components/schemas/com.example.stable.v1.CronTab"}


def supports_query_param_v3(doc: dict[str, Any], gvk: dict[str, str], param: str) -> bool:
    """What kubectl's v3 query param verifier does."""
    for item in doc["paths"].values():
        patch = item.get("patch")
        if patch is None or patch.get("x-kubernetes-group-version-kind") != gvk:
            continue
        return any(p.get("name") == param for p in patch.get("parameters", []))
    return False


def test_kubectl_finds_field_validation() -> None:
    doc = apps_doc()
    assert supports_query_param_v3(
        doc, {"group": "apps", "kind": "Deployment", "version": "v1"}, "fieldValidation"
    )
    assert not supports_query_param_v3(doc, {"group": "", "kind": "Pod", "version": "v1"}, "fieldValidation")


def test_delete_body_is_optional_json() -> None:
    delete = apps_doc()["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["delete"]
    assert set(delete["requestBody"]["content"]) == {"application/json"}
    assert "required" not in delete["requestBody"]


def test_path_keys() -> None:
    assert openapi_v3_path_key("v1") == "api/v1"
    assert openapi_v3_path_key("apps/v1") == "apis/apps/v1"
    assert openapi_v3_path_key("apis/apps/v1") == "apis/apps/v1"


def test_etag_is_uppercase_sha512_of_served_bytes() -> None:
    data = serialize_openapi(apps_doc())
    etag = openapi_etag(data)
    assert re.fullmatch(r"[0-9A-F]{128}", etag)
    assert etag == hashlib.sha512(data).hexdigest().upper()
    assert orjson.loads(data) == apps_doc()


def test_index() -> None:
    index = build_openapi_v3_index(["v1", "apps/v1"], {"v1": "AB", "apis/apps/v1": "CD"})
    assert index == {
        "paths": {
            "api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=AB"},
            "apis/apps/v1": {"serverRelativeURL": "/openapi/v3/apis/apps/v1?hash=CD"},
        }
    }
    with pytest.raises(KeyError):
        build_openapi_v3_index(["batch/v1"], {})


def test_build_all_and_cache() -> None:
    clear_openapi_cache()
    documents = build_all_openapi_v3(RESOURCES, builtin_definitions())
    assert list(documents) == ["apps/v1", "v1", "batch/v1", "stable.example.com/v1"]
    assert build_openapi_v3("apps", "v1", RESOURCES, builtin_definitions()) is documents["apps/v1"]
    # only this group-version's resources matter for the cache key
    assert build_openapi_v3("apps", "v1", [DEPLOYMENTS], builtin_definitions()) is documents["apps/v1"]


def test_unknown_group_version_has_only_the_root_path() -> None:
    doc = build_openapi_v3("nothing.io", "v1", RESOURCES, builtin_definitions())
    assert list(doc["paths"]) == ["/apis/nothing.io/v1/"]
    assert set(doc["components"]["schemas"]) == {
        "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList",
        "io.k8s.apimachinery.pkg.apis.meta.v1.APIResource",
    }
