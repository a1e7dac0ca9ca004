"""Discovery documents (legacy and aggregated) built from ``ResourceInfo`` values.

Shapes and key order follow the Go structs kube-apiserver serializes (``metav1.APIResource``,
``APIResourceList``, ``APIGroup``, ``apidiscovery/v2.APIGroupDiscoveryList``). Where the catalog
and the captured reference documents agree, whole entries are compared with the reference in
``<shared>/k8s-reference/api/discovery`` (``KUBECHAIN_SHARED_DIR``, default ``../shared``).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from coreapi import catalog
from coreapi.server import _order_key
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.server.discovery import (
    DiscoveryDocuments,
    aggregated_body,
    aggregated_resource,
    api_resource,
    api_subresource,
    wants_aggregated,
)
from support.reference import DISCOVERY_DIR

KUBECTL_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)

DEPLOYMENTS = ResourceInfo("apps", "v1", "Deployment", "deployments", "deployment", True,
                           short_names=("deploy",), categories=("all",),
                           subresources=("status", "scale"))
NODES = ResourceInfo("", "v1", "Node", "nodes", "node", False, short_names=("no",),
                     subresources=("status",))
CONFIGMAPS = ResourceInfo("", "v1", "ConfigMap", "configmaps", "configmap", True, short_names=("cm",))
JOBS = ResourceInfo("batch", "v1", "Job", "jobs", "job", True, categories=("all",), subresources=("status",))
WIDGETS_V1 = ResourceInfo("example.com", "v1", "Widget", "widgets", "widget", True)
WIDGETS_V2 = ResourceInfo("example.com", "v2", "Widget", "widgets", "widget", True)


def _simple_order(group: str, version: str) -> tuple[Any, ...]:
    # core first, then groups by name, newer version first within a group
    return (group != "", group, version != "v2", version)


def _docs(*infos: ResourceInfo, storage_hash: Any = None) -> DiscoveryDocuments:
    if storage_hash is None:
        return DiscoveryDocuments(list(infos), _simple_order)
    return DiscoveryDocuments(list(infos), _simple_order, storage_hash)


def _load(docs: DiscoveryDocuments, path: str) -> Any:
    return orjson.loads(docs.by_path[path])


# -- single entries --------------------------------------------------------------------------


def test_api_resource_key_order_matches_go_struct() -> None:
    entry = api_resource(DEPLOYMENTS, "8aSe+NMegvE=")
    assert list(entry) == ["name", "singularName", "namespaced", "kind", "verbs", "shortNames",
                           "categories", "storageVersionHash"]
    assert entry["verbs"] == ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def test_api_resource_omits_empty_optional_fields() -> None:
    info = ResourceInfo("", "v1", "Thing", "things", "thing", False, verbs=("list", "get"))
    entry = api_resource(info)
    assert entry == {"name": "things", "singularName": "thing", "namespaced": False, "kind": "Thing",
                     "verbs": ["get", "list"]}


def test_status_subresource_entry() -> None:
    entry = api_subresource(DEPLOYMENTS, "status")
    assert entry == {"name": "deployments/status", "singularName": "", "namespaced": True,
                     "kind": "Deployment", "verbs": ["get", "patch", "update"]}
    assert "group" not in entry and "version" not in entry


def test_scale_subresource_is_autoscaling_v1_scale_with_group_before_kind() -> None:
    entry = api_subresource(DEPLOYMENTS, "scale")
    assert list(entry) == ["name", "singularName", "namespaced", "group", "version", "kind", "verbs"]
    assert (entry["group"], entry["version"], entry["kind"]) == ("autoscaling", "v1", "Scale")


def test_aggregated_resource_shape_and_order() -> None:
    entry = aggregated_resource(DEPLOYMENTS)
    assert list(entry) == ["resource", "responseKind", "scope", "singularResource", "verbs", "shortNames",
                           "categories", "subresources"]
    assert entry["responseKind"] == {"group": "", "version": "", "kind": "Deployment"}
    assert list(entry["responseKind"]) == ["group", "version", "kind"]
    assert entry["scope"] == "Namespaced"
    subs = entry["subresources"]
    assert [s["subresource"] for s in subs] == ["scale", "status"]
    assert subs[0] == {"subresource": "scale",
                       "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                       "verbs": ["get", "patch", "update"]}
    assert subs[1]["responseKind"] == {"group": "", "version": "", "kind": "Deployment"}


def test_aggregated_resource_cluster_scope_and_no_subresources_key() -> None:
    entry = aggregated_resource(ResourceInfo("", "v1", "Namespace", "namespaces", "namespace", False))
    assert entry["scope"] == "Cluster"
    assert "subresources" not in entry and "shortNames" not in entry and "categories" not in entry


# -- whole documents -------------------------------------------------------------------------


def test_core_resource_list_has_no_api_version() -> None:
    docs = _docs(NODES, CONFIGMAPS)
    raw = docs.by_path["/api/v1"]
    doc = orjson.loads(raw)
    assert list(doc) == ["kind", "groupVersion", "resources"]
    assert doc["kind"] == "APIResourceList" and doc["groupVersion"] == "v1"
    # sorted by plural; a subresource follows its resource
    assert [r["name"] for r in doc["resources"]] == ["configmaps", "nodes", "nodes/status"]


def test_group_resource_list_shape() -> None:
    doc = _load(_docs(DEPLOYMENTS), "/apis/apps/v1")
    assert list(doc) == ["kind", "apiVersion", "groupVersion", "resources"]
    assert doc["apiVersion"] == "v1" and doc["groupVersion"] == "apps/v1"
    assert [r["name"] for r in doc["resources"]] == ["deployments", "deployments/scale", "deployments/status"]


def test_group_and_group_list_documents() -> None:
    docs = _docs(CONFIGMAPS, WIDGETS_V1, WIDGETS_V2, JOBS)
    group = _load(docs, "/apis/example.com")
    assert list(group) == ["kind", "apiVersion", "name", "versions", "preferredVersion"]
    assert group["kind"] == "APIGroup" and group["apiVersion"] == "v1"
    # versions in priority order and the preferred one is the first
    assert group["versions"] == [{"groupVersion": "example.com/v2", "version": "v2"},
                                 {"groupVersion": "example.com/v1", "version": "v1"}]
    assert group["preferredVersion"] == {"groupVersion": "example.com/v2", "version": "v2"}
    groups = _load(docs, "/apis")
    assert list(groups) == ["kind", "apiVersion", "groups"]
    assert groups["kind"] == "APIGroupList"
    assert [g["name"] for g in groups["groups"]] == ["batch", "example.com"]
    assert "kind" not in groups["groups"][0]
    assert "/apis/" not in docs.by_path and "/apis/" + "" not in docs.by_path


def test_api_versions_document() -> None:
    doc = _load(_docs(CONFIGMAPS), "/api")
    assert doc["kind"] == "APIVersions"
    assert doc["versions"] == ["v1"]


def test_no_core_group_means_no_api_document() -> None:
    docs = _docs(JOBS)
    assert "/api" not in docs.by_path and "/api/v1" not in docs.by_path
    assert docs.aggregated_api["items"] == []


def test_empty_resource_set() -> None:
    docs = _docs()
    assert orjson.loads(docs.by_path["/apis"]) == {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}
    assert docs.group_versions == []


def test_storage_hash_callback_is_used_for_resources_only() -> None:
    docs = _docs(DEPLOYMENTS, storage_hash=lambda info: f"hash-{info.plural}")
    resources = _load(docs, "/apis/apps/v1")["resources"]
    assert resources[0]["storageVersionHash"] == "hash-deployments"
    assert all("storageVersionHash" not in r for r in resources[1:])


def test_rebuild_after_resources_change() -> None:
    docs = _docs(CONFIGMAPS)
    assert "/apis/apps/v1" not in docs.by_path
    docs.resources = [CONFIGMAPS, DEPLOYMENTS]
    docs.rebuild()
    assert "/apis/apps/v1" in docs.by_path
    assert docs.group_versions == [("", "v1"), ("apps", "v1")]


# -- aggregated ------------------------------------------------------------------------------


def test_aggregated_document_shapes() -> None:
    docs = _docs(CONFIGMAPS, WIDGETS_V1, WIDGETS_V2, DEPLOYMENTS)
    apis = docs.aggregated_apis
    assert list(apis) == ["kind", "apiVersion", "metadata", "items"]
    assert apis["kind"] == "APIGroupDiscoveryList"
    assert apis["apiVersion"] == "apidiscovery.k8s.io/v2"
    assert apis["metadata"] == {}
    names = [item["metadata"]["name"] for item in apis["items"]]
    assert names == ["apps", "example.com"]
    example = apis["items"][1]
    assert list(example) == ["metadata", "versions"]
    assert example["metadata"] == {"creationTimestamp": None, "name": "example.com"}
    assert [v["version"] for v in example["versions"]] == ["v2", "v1"]
    assert list(example["versions"][0]) == ["version", "resources", "freshness"]
    assert example["versions"][0]["freshness"] == "Current"
    core = docs.aggregated_api
    assert len(core["items"]) == 1
    # the core group has no name in its metadata
    assert core["items"][0]["metadata"] == {"creationTimestamp": None}
    assert [r["resource"] for r in core["items"][0]["versions"][0]["resources"]] == ["configmaps"]


def test_aggregated_body_versions() -> None:
    docs = _docs(DEPLOYMENTS)
    v2 = orjson.loads(aggregated_body(docs.aggregated_apis, "v2"))
    beta = orjson.loads(aggregated_body(docs.aggregated_apis, "v2beta1"))
    assert v2["apiVersion"] == "apidiscovery.k8s.io/v2"
    assert beta["apiVersion"] == "apidiscovery.k8s.io/v2beta1"
    assert list(beta) == list(v2)
    assert beta["items"] == v2["items"]
    # the cached document itself is not changed by rendering v2beta1
    assert docs.aggregated_apis["apiVersion"] == "apidiscovery.k8s.io/v2"


# -- wants_aggregated --------------------------------------------------------------------------


@pytest.mark.parametrize(("accept", "expected"), [
    (KUBECTL_ACCEPT, "v2"),
    ("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
     "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", "v2beta1"),
    ("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", "v2beta1"),
    ("application/json; g=apidiscovery.k8s.io; v=v2; as=APIGroupDiscoveryList", "v2"),
    ("application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io", "v2"),
    ("application/json", ""),
    ("", ""),
    ("*/*", ""),
    ("application/json;g=apidiscovery.k8s.io;v=v1;as=APIGroupDiscoveryList,application/json", ""),
    ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscovery", ""),
    ("application/json;g=meta.k8s.io;v=v2;as=APIGroupDiscoveryList", ""),
    ("application/json;g=apidiscovery.k8s.io;v=v2", ""),
    ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json", ""),
    ("application/json;g=apidiscovery.k8s.io;as=APIGroupDiscoveryList;v", ""),
])
def test_wants_aggregated(accept: str, expected: str) -> None:
    assert wants_aggregated(accept) == expected


# -- against captured kube-apiserver documents ----------------------------------------------------


@pytest.fixture(scope="module")
def builtin_docs() -> DiscoveryDocuments:
    return DiscoveryDocuments(list(catalog.BUILTIN_RESOURCES), _order_key,
                              lambda info: info.extra.get(catalog.STORAGE_VERSION_HASH_KEY, ""))


def _reference(name: str) -> Any:
    path = DISCOVERY_DIR / name
    if not path.exists():
        pytest.skip(f"reference discovery document {path} not found (set KUBECHAIN_SHARED_DIR)")
    return orjson.loads(path.read_bytes())


@pytest.mark.parametrize("doc_path", [
    "/apis/batch/v1", "/apis/autoscaling/v1", "/apis/rbac.authorization.k8s.io/v1",
    "/apis/scheduling.k8s.io/v1", "/apis/events.k8s.io/v1", "/apis/apps", "/apis/batch",
])
def test_whole_documents_equal_reference(builtin_docs: DiscoveryDocuments, doc_path: str) -> None:
    ref = _reference(doc_path.strip("/").replace("/", "__") + ".json")
    assert orjson.loads(builtin_docs.by_path[doc_path]) == ref


@pytest.mark.parametrize(("doc_path", "names"), [
    ("/api/v1", ["pods", "pods/status", "services", "services/status", "configmaps",
                 "replicationcontrollers/scale", "namespaces", "nodes/status"]),
    ("/apis/apps/v1", ["deployments/scale", "deployments/status", "statefulsets/scale",
                       "replicasets/scale", "daemonsets/status"]),
])
def test_entries_equal_reference(builtin_docs: DiscoveryDocuments, doc_path: str, names: list[str]) -> None:
    ref = _reference(doc_path.strip("/").replace("/", "__") + ".json")
    ours = {r["name"]: r for r in orjson.loads(builtin_docs.by_path[doc_path])["resources"]}
    theirs = {r["name"]: r for r in ref["resources"]}
    for name in names:
        assert ours[name] == theirs[name], name


def test_subresources_follow_their_resource_like_reference(builtin_docs: DiscoveryDocuments) -> None:
    ref = _reference("api__v1.json")
    ours = [r["name"] for r in orjson.loads(builtin_docs.by_path["/api/v1"])["resources"]]
    theirs = [r["name"] for r in ref["resources"] if r["name"] in set(ours)]
    assert ours == theirs


@pytest.mark.parametrize(("group", "resources"), [
    ("apps", ["controllerrevisions", "daemonsets", "deployments", "replicasets", "statefulsets"]),
    ("batch", ["cronjobs", "jobs"]),
])
def test_aggregated_entries_equal_reference(builtin_docs: DiscoveryDocuments, group: str,
                                            resources: list[str]) -> None:
    ref = _reference("aggregated_v2.json")
    ref_item = next(i for i in ref["items"] if i["metadata"].get("name") == group)
    our_item = next(i for i in builtin_docs.aggregated_apis["items"] if i["metadata"].get("name") == group)
    assert our_item["metadata"] == ref_item["metadata"]
    ref_res = {r["resource"]: r for r in ref_item["versions"][0]["resources"]}
    our_version = our_item["versions"][0]
    assert our_version["version"] == ref_item["versions"][0]["version"]
    assert our_version["freshness"] == ref_item["versions"][0]["freshness"]
    our_res = {r["resource"]: r for r in our_version["resources"]}
    for name in resources:
        assert our_res[name] == ref_res[name], name


def test_aggregated_group_order_starts_like_reference(builtin_docs: DiscoveryDocuments) -> None:
    ref = _reference("aggregated_v2.json")
    ours = [i["metadata"]["name"] for i in builtin_docs.aggregated_apis["items"]]
    theirs = [i["metadata"]["name"] for i in ref["items"] if i["metadata"]["name"] in set(ours)]
    # the legacy /apis order and the aggregated order both come from group priorities
    assert ours[:4] == theirs[:4]
