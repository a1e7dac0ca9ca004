"""Field sets, comparison, apply merge and removal with the 1.33 built-in and CRD schemas."""

from __future__ import annotations

from typing import Any

import pytest
from genericapi.apimachinery.fieldmanager.fieldset import FieldSet
from genericapi.apimachinery.fieldmanager.schema import SchemaResolver, TypeNode
from genericapi.apimachinery.fieldmanager.typed import (
    MISSING,
    TypedError,
    changed,
    compare,
    merge,
    remove_items,
    to_field_set,
    validate,
    validate_applied,
)
from genericapi.apimachinery.schemas import SchemaCatalog

CATALOG = SchemaCatalog.load("1.33")
RESOLVER = SchemaResolver(CATALOG.definitions)


def root(group: str, version: str, kind: str) -> TypeNode:
    return RESOLVER.root(CATALOG.root_schema(group, version, kind))


DEPLOYMENT = root("apps", "v1", "Deployment")
SERVICE = root("", "v1", "Service")


def deployment(containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec,
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": containers}}}}


def test_deployment_field_set_matches_kube() -> None:
    obj = deployment([{"name": "nginx", "image": "nginx:1.25",
                       "ports": [{"containerPort": 80}],
                       "env": [{"name": "A", "value": "1"}]}], replicas=2)
    fs = to_field_set(obj, DEPLOYMENT)
    assert fs.to_json() == {
        "f:apiVersion": {}, "f:kind": {},
        "f:metadata": {"f:labels": {"f:app": {}}, "f:name": {}},
        "f:spec": {
            "f:replicas": {},
            "f:selector": {},  # LabelSelector is an atomic map
            "f:template": {"f:metadata": {"f:labels": {"f:app": {}}}, "f:spec": {"f:containers": {
                'k:{"name":"nginx"}': {
                    ".": {}, "f:env": {'k:{"name":"A"}': {".": {}, "f:name": {}, "f:value": {}}},
                    "f:image": {}, "f:name": {},
                    # protocol is a key with default TCP
                    "f:ports": {'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}}}}}}}}


def test_service_ports_by_port_and_protocol() -> None:
    svc = {"spec": {"ports": [{"port": 80, "protocol": "TCP", "name": "http"},
                              {"port": 80, "protocol": "UDP", "name": "dns"}],
                    "selector": {"app": "x"}}}
    fs = to_field_set(svc, SERVICE)
    assert list(fs.child("f:spec").child("f:ports").to_json()) == [
        'k:{"port":80,"protocol":"TCP"}', 'k:{"port":80,"protocol":"UDP"}']
    assert fs.to_json()["f:spec"]["f:selector"] == {}  # atomic map in 1.33


def test_sets_of_scalars_and_empty_values() -> None:
    obj = {"metadata": {"finalizers": ["a", "b"], "annotations": {}}}
    fs = to_field_set(obj, DEPLOYMENT)
    assert fs.to_json() == {"f:metadata": {"f:annotations": {}, "f:finalizers": {'v:"a"': {}, 'v:"b"': {}}}}


def test_compare_added_modified_removed() -> None:
    old = deployment([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}], replicas=1)
    new = deployment([{"name": "a", "image": "a:2"}, {"name": "c", "image": "c:1"}], replicas=1)
    cmp = compare(old, new, DEPLOYMENT)
    containers = ("f:spec", "f:template", "f:spec", "f:containers")
    assert cmp.modified.to_json() == FieldSet.of((*containers, 'k:{"name":"a"}', "f:image")).to_json()
    assert cmp.added.has((*containers, 'k:{"name":"c"}'))
    assert cmp.added.has((*containers, 'k:{"name":"c"}', "f:image"))
    assert cmp.removed.has((*containers, 'k:{"name":"b"}'))
    assert not cmp.modified.has(("f:spec", "f:replicas"))


def test_compare_atomic_selector_is_one_leaf() -> None:
    old = deployment([], replicas=1)
    new = deployment([], replicas=1)
    new["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    assert compare(old, new, DEPLOYMENT).modified.to_json() == {"f:spec": {"f:selector": {}}}


def test_merge_keeps_live_items_and_applied_order() -> None:
    live = deployment([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}])
    applied = deployment([{"name": "c", "image": "c:1"}, {"name": "a", "image": "a:2"}])
    merged = merge(live, applied, DEPLOYMENT)
    names = [(c["name"], c["image"]) for c in merged["spec"]["template"]["spec"]["containers"]]
    assert names == [("c", "c:1"), ("a", "a:2"), ("b", "b:1")]


def test_merge_atomic_list_replaces_and_granular_map_merges() -> None:
    live = {"metadata": {"labels": {"a": "1"}}, "spec": {"selector": {"matchLabels": {"x": "1"}},
                                                         "template": {"spec": {"containers": [
                                                             {"name": "a", "args": ["1", "2"]}]}}}}
    applied = {"metadata": {"labels": {"b": "2"}}, "spec": {"selector": {"matchLabels": {"y": "2"}},
                                                            "template": {"spec": {"containers": [
                                                                {"name": "a", "args": ["3"]}]}}}}
    merged = merge(live, applied, DEPLOYMENT)
    assert merged["metadata"]["labels"] == {"a": "1", "b": "2"}
    assert merged["spec"]["selector"] == {"matchLabels": {"y": "2"}}
    assert merged["spec"]["template"]["spec"]["containers"] == [{"name": "a", "args": ["3"]}]


def test_duplicate_keys_in_applied_config_are_errors() -> None:
    applied = deployment([{"name": "c", "env": [{"name": "FOO"}, {"name": "FOO"}]}])
    with pytest.raises(TypedError) as err:
        validate(applied, DEPLOYMENT)
    assert str(err.value) == '.spec.template.spec.containers[name="c"].env: duplicate entries for key [name="FOO"]'


def test_item_without_keys_is_an_error() -> None:
    with pytest.raises(TypedError) as err:
        validate(deployment([{"image": "x"}]), DEPLOYMENT)
    assert "omits all key fields" in str(err.value)
    assert str(err.value).startswith(".spec.template.spec.containers: element 0:")


def test_remove_items() -> None:
    obj = deployment([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}], replicas=3)
    gone = FieldSet.of(("f:spec", "f:replicas"),
                       ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"b"}'),
                       ("f:metadata", "f:labels", "f:app"))
    out = remove_items(obj, gone, DEPLOYMENT)
    assert "replicas" not in out["spec"]
    assert out["spec"]["template"]["spec"]["containers"] == [{"name": "a", "image": "a:1"}]
    assert "labels" not in out["metadata"]
    assert remove_items({"a": 1}, FieldSet.of(("f:a",)), DEPLOYMENT) is MISSING


CRD_SCHEMA = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
        "spec": {"type": "object", "properties": {
            "hosts": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "routes": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["path"],
                       "items": {"type": "object", "properties": {"path": {"type": "string"},
                                                                   "port": {"type": "integer"}}}},
            "opaque": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "tags": {"type": "object", "additionalProperties": {"type": "string"},
                     "x-kubernetes-map-type": "atomic"},
            "plain": {"type": "array", "items": {"type": "string"}}}}}}


def test_crd_schema_semantics_and_deduced_parts() -> None:
    node = RESOLVER.root(CRD_SCHEMA)
    obj = {"metadata": {"labels": {"a": "b"}, "finalizers": ["x"]},
           "spec": {"hosts": ["a.example"], "routes": [{"path": "/", "port": 80}],
                    "opaque": {"deep": {"x": [1, 2]}, "y": 1}, "tags": {"k": "v"}, "plain": ["a"]}}
    assert to_field_set(obj, node).to_json() == {
        "f:metadata": {"f:finalizers": {'v:"x"': {}}, "f:labels": {"f:a": {}}},
        "f:spec": {"f:hosts": {'v:"a.example"': {}},
                   "f:opaque": {"f:deep": {".": {}, "f:x": {}}, "f:y": {}},
                   "f:plain": {},
                   "f:routes": {'k:{"path":"/"}': {".": {}, "f:path": {}, "f:port": {}}},
                   "f:tags": {}}}


def test_fully_untyped_object_is_deduced() -> None:
    node = RESOLVER.root(None)
    fs = to_field_set({"metadata": {"name": "x"}, "spec": {"a": {"b": 1}, "l": [1]}}, node)
    assert fs.to_json() == {"f:metadata": {"f:name": {}},
                            "f:spec": {".": {}, "f:a": {".": {}, "f:b": {}}, "f:l": {}}}


EMBEDDED_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
    # a closed embedded resource: kube's CRD OpenAPI adds apiVersion, kind and ObjectMeta to it
    "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                 "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                                "metadata": {"type": "object", "properties": {"name": {"type": "string"}}}}},
    # an open one: the same three typed, anything else deduced
    "objects": {"type": "array", "items": {"type": "object", "x-kubernetes-embedded-resource": True,
                                           "x-kubernetes-preserve-unknown-fields": True}}}}}}


def test_embedded_resources_are_typed_as_kube_types_them() -> None:
    node = RESOLVER.root(EMBEDDED_SCHEMA)
    meta = {"name": "t", "labels": {"a": "b"}, "finalizers": ["f"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u1"}]}
    obj = {"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"size": 1}},
                    "objects": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"finalizers": ["g"]},
                                 "data": {"x": [1]}}]}}
    typed_meta = {"f:finalizers": {'v:"f"': {}}, "f:labels": {"f:a": {}}, "f:name": {},
                  "f:ownerReferences": {'k:{"uid":"u1"}': {}}}  # an OwnerReference is an atomic struct
    assert to_field_set(obj, node).to_json() == {"f:spec": {
        "f:objects": {},  # a list without list-type is atomic
        "f:template": {"f:apiVersion": {}, "f:kind": {}, "f:metadata": typed_meta, "f:spec": {"f:size": {}}}}}
    # ObjectMeta replaces the CRD's own metadata schema; other fields are not declared
    with pytest.raises(TypedError, match=r"^\.spec\.template\.colour: field not declared in schema$"):
        validate_applied({"spec": {"template": {"kind": "Pod", "colour": "red"}}}, node)
    with pytest.raises(TypedError, match=r"^\.spec\.template\.metadata\.labelz: field not declared in schema$"):
        validate_applied({"spec": {"template": {"metadata": {"labelz": {}}}}}, node)
    validate_applied(obj, node)
    # an embedded resource that preserves unknown fields: metadata still ObjectMeta, the rest deduced
    items = node.child("spec")[0].child("objects")[0].elem()
    assert to_field_set(obj["spec"]["objects"][0], items).to_json() == {
        "f:apiVersion": {}, "f:data": {".": {}, "f:x": {}}, "f:kind": {},
        "f:metadata": {"f:finalizers": {'v:"g"': {}}}}
    validate_applied({"colour": "red", "metadata": {"name": "x"}}, items)
    with pytest.raises(TypedError, match=r"^\.metadata\.labelz: field not declared in schema$"):
        validate_applied({"metadata": {"labelz": {}}}, items)


def _mutations(value: Any, rnd: Any) -> Any:
    """A random variant of ``value``: keys dropped, values replaced, list items repeated,
    dropped or reordered, nulls and empty values, type changes."""
    choices = [None, {}, [], 0, 1, "s", True, {"q": 1}, [1, 2], [{"name": "A"}]]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            roll = rnd.random()
            if roll < 0.1:
                continue
            out[k] = rnd.choice(choices) if roll < 0.2 else _mutations(v, rnd) if roll < 0.7 else v
        if rnd.random() < 0.15:
            out[rnd.choice(["new", "name", "image"])] = rnd.choice(choices)
        return out
    if isinstance(value, list):
        items = [_mutations(x, rnd) if rnd.random() < 0.5 else x for x in value]
        roll = rnd.random()
        if roll < 0.1 and items:
            items.append(items[0])
        elif roll < 0.2 and items:
            items.pop(rnd.randrange(len(items)))
        elif roll < 0.3:
            items.reverse()
        return items
    return rnd.choice(choices) if rnd.random() < 0.3 else value


def test_changed_is_added_and_modified_of_compare() -> None:
    """``changed`` (the create fast path) is exactly what ``compare`` reports added or modified."""
    import random

    rnd = random.Random(20261127)
    dep = deployment([{"name": "web", "image": "nginx", "args": ["a"], "ports": [{"containerPort": 80}],
                       "env": [{"name": "A", "value": "1"}, {"name": "B"}]}], replicas=1)
    svc = {"spec": {"ports": [{"port": 80, "protocol": "TCP"}, {"port": 80, "protocol": "UDP"}],
                    "selector": {"a": "b"}}}
    crd = {"metadata": {"finalizers": ["x"]}, "spec": {"hosts": ["a"], "routes": [{"path": "/"}], "tags": {"k": "v"},
                                                       "opaque": {"deep": {"x": [1]}}, "plain": ["a"]}}
    cases = [(dep, DEPLOYMENT), (svc, SERVICE), (crd, RESOLVER.root(CRD_SCHEMA)), (crd, RESOLVER.root(None))]
    checked = 0
    for _ in range(400):
        obj, node = rnd.choice(cases)
        a = _mutations(obj, rnd)
        b = _mutations(a, rnd)
        for lhs, rhs in ((a, b), (b, a), (MISSING, b), (a, MISSING), (a, a), (None, b), ({"metadata": {}}, b)):
            try:
                cmp = compare(lhs, rhs, node)
            except ValueError:
                with pytest.raises(ValueError):
                    changed(lhs, rhs, node)
                continue
            assert changed(lhs, rhs, node) == cmp.added.union(cmp.modified), (lhs, rhs)
            checked += 1
    assert checked > 2000
