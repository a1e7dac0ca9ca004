"""Conversion of JSON-Schema definitions to the Swagger 2.0 / OpenAPI 3.0 forms kube publishes."""

from __future__ import annotations

import functools
import os
from typing import Any

import kubernetes_validate
import orjson
import pytest
from genericapi.apimachinery.openapi_schema import (
    closure,
    collect_refs,
    convert_definitions,
    convert_schema,
    gvk_index,
    ref_name,
    reference_graph,
    synthetic_name,
)


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


@pytest.mark.parametrize("v3", [False, True])
def test_nullable_type_lists_become_single_types(v3: bool) -> None:
    assert convert_schema({"type": ["string", "null"]}, v3=v3) == {"type": "string"}
    assert convert_schema({"type": ["null"]}, v3=v3) == {}
    assert convert_schema({"type": "integer", "format": "int32"}, v3=v3) == {
        "type": "integer",
        "format": "int32",
    }


@pytest.mark.parametrize("v3", [False, True])
def test_int_or_string_and_quantity(v3: bool) -> None:
    converted = convert_definitions(builtin_definitions(), v3=v3)
    int_or_string = converted["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]
    assert int_or_string["type"] == "string"
    assert int_or_string["format"] == "int-or-string"
    assert "oneOf" not in int_or_string
    quantity = converted["io.k8s.apimachinery.pkg.api.resource.Quantity"]
    assert quantity["type"] == "string"
    assert "format" not in quantity and "oneOf" not in quantity


def test_v2_refs_keep_siblings() -> None:
    node = {"$ref": "#/$defs/a.B", "description": "d", "x-kubernetes-patch-strategy": "retainKeys"}
    assert convert_schema(node, v3=False) == {
        "$ref": "#/definitions/a.B",
        "description": "d",
        "x-kubernetes-patch-strategy": "retainKeys",
    }


def test_v3_wraps_refs_with_siblings_in_allof() -> None:
    node = {"$ref": "#/$defs/a.B", "description": "d", "x-kubernetes-patch-strategy": "retainKeys"}
    assert convert_schema(node, v3=True) == {
        "allOf": [{"$ref": "#/components/schemas/a.B"}],
        "description": "d",
        "x-kubernetes-patch-strategy": "retainKeys",
    }
    # a bare reference (e.g. array items) stays a bare reference
    assert convert_schema({"items": {"$ref": "#/$defs/a.B"}, "type": ["array", "null"]}, v3=True) == {
        "items": {"$ref": "#/components/schemas/a.B"},
        "type": "array",
    }


def test_dialect_specific_keywords() -> None:
    node = {
        "anyOf": [{"type": "string"}],
        "not": {"type": "integer"},
        "nullable": True,
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "patternProperties": {"^a": {"type": "string"}},
    }
    assert convert_schema(node, v3=False) == {}
    v3 = convert_schema(node, v3=True)
    assert v3 == {
        "anyOf": [{"type": "string"}],
        "not": {"type": "integer"},
        "nullable": True,
        "patternProperties": {"^a": {"type": "string"}},
    }


def test_unrecognised_oneof_kept_only_in_v3() -> None:
    node = {"oneOf": [{"type": "string"}, {"type": "boolean"}]}
    assert convert_schema(node, v3=False) == {}
    assert convert_schema(node, v3=True) == {"oneOf": [{"type": "boolean"}, {"type": "string"}]}
    structured = {"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}
    assert convert_schema(structured, v3=True) == structured
    assert convert_schema(structured, v3=False) == {}


def test_kubernetes_extensions_survive() -> None:
    converted = convert_definitions(builtin_definitions(), v3=False)
    spec = converted["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]
    assert spec["strategy"]["x-kubernetes-patch-strategy"] == "retainKeys"
    containers = converted["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-patch-strategy"] == "merge"
    assert containers["x-kubernetes-list-type"] == "map"
    assert containers["x-kubernetes-list-map-keys"] == ["name"]
    assert converted["io.k8s.api.apps.v1.Deployment"]["x-kubernetes-group-version-kind"] == [
        {"group": "apps", "kind": "Deployment", "version": "v1"}
    ]


def test_type_meta_enums_from_schema_source_are_removed() -> None:
    converted = convert_definitions(builtin_definitions(), v3=False)
    deployment = converted["io.k8s.api.apps.v1.Deployment"]["properties"]
    assert deployment["apiVersion"] == {
        "description": deployment["apiVersion"]["description"],
        "type": "string",
    }
    assert "enum" not in deployment["kind"]
    assert (
        "enum"
        not in converted["io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"]["properties"]["apiVersion"]
    )


def test_custom_enum_on_kind_is_kept() -> None:
    definition = {
        "type": "object",
        "properties": {"kind": {"type": "string", "enum": ["Other"]}},
        "x-kubernetes-group-version-kind": [{"group": "g.io", "version": "v1", "kind": "Thing"}],
    }
    converted = convert_definitions({"io.g.v1.Thing": definition}, v3=False)
    assert converted["io.g.v1.Thing"]["properties"]["kind"]["enum"] == ["Other"]


def test_input_definitions_are_not_mutated() -> None:
    definition = {
        "properties": {"kind": {"type": ["string", "null"], "enum": ["Thing"]}},
        "x-kubernetes-group-version-kind": [{"group": "g.io", "version": "v1", "kind": "Thing"}],
    }
    before = orjson.dumps(definition)
    convert_definitions({"x": definition}, v3=True)
    assert orjson.dumps(definition) == before


def test_ref_name_accepts_every_spelling() -> None:
    for ref in ("#/$defs/a.B", "#/definitions/a.B", "#/components/schemas/a.B"):
        assert ref_name(ref) == "a.B"


def test_collect_refs_ignores_extension_values() -> None:
    node = {"properties": {"a": {"$ref": "#/$defs/X"}}, "x-weird": {"$ref": "#/$defs/Y"}}
    assert collect_refs(node, set()) == {"X"}


def test_closure_of_deployment_reaches_pod_and_meta_types() -> None:
    reachable = closure(["io.k8s.api.apps.v1.Deployment"], reference_graph(builtin_definitions()))
    assert {
        "io.k8s.api.core.v1.PodSpec",
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
    } <= reachable
    assert "io.k8s.api.batch.v1.Job" not in reachable


def test_gvk_index_prefers_the_specific_definition() -> None:
    index = gvk_index(builtin_definitions())
    assert index[("apps", "v1", "Deployment")] == "io.k8s.api.apps.v1.Deployment"
    assert index[("", "v1", "Status")] == "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
    assert index[("autoscaling", "v1", "Scale")] == "io.k8s.api.autoscaling.v1.Scale"
    # WatchEvent is listed under every group-version
    assert index[("apps", "v1", "WatchEvent")] == "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent"


def test_synthetic_names_follow_kube_crd_naming() -> None:
    assert synthetic_name("stable.example.com", "v1", "CronTab") == "com.example.stable.v1.CronTab"
    assert synthetic_name("", "v1", "Thing") == "io.k8s.api.core.v1.Thing"
