"""Protobuf encoding of /openapi/v2 (gnostic openapi.v2.Document) and the proto code generator."""

from __future__ import annotations

import functools
import importlib
import os
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import orjson
import pytest
import yaml
from genericapi import protogen
from genericapi.apimachinery.openapi import build_openapi_v2
from genericapi.apimachinery.openapi_proto import openapi_v2_to_protobuf, parameter_message, to_yaml
from genericapi.apimachinery.resources import ResourceInfo


def document_class() -> Any:
    protogen.ensure_generated()
    from genericapi.generated.gnostic import openapi_v2_pb2

    return openapi_v2_pb2.Document


def decode(data: bytes) -> Any:
    document = document_class()()
    document.ParseFromString(data)
    return document


SMALL_DOC: dict[str, Any] = {
    "swagger": "2.0",
    "info": {"title": "Kubernetes", "version": "v1.33.0"},
    "paths": {
        "/apis/g.io/v1/namespaces/{namespace}/things/{name}": {
            "parameters": [
                {"in": "path", "name": "name", "required": True, "type": "string", "uniqueItems": True},
                {"$ref": "#/parameters/pretty"},
            ],
            "patch": {
                "operationId": "patchGIoV1NamespacedThing",
                "consumes": ["application/merge-patch+json"],
                "parameters": [
                    {
                        "in": "body",
                        "name": "body",
                        "required": True,
                        "schema": {"$ref": "#/definitions/Patch"},
                    },
                    {"in": "query", "name": "fieldValidation", "type": "string", "uniqueItems": True},
                ],
                "responses": {
                    "200": {"description": "OK", "schema": {"$ref": "#/definitions/io.g.v1.Thing"}},
                    "401": {"description": "Unauthorized"},
                },
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {"group": "g.io", "kind": "Thing", "version": "v1"},
            },
        }
    },
    "definitions": {
        "io.g.v1.Thing": {
            "type": "object",
            "required": ["spec"],
            "properties": {
                "spec": {"$ref": "#/definitions/io.g.v1.ThingSpec", "description": "the spec"},
                "ports": {
                    "type": "array",
                    "items": {"type": "integer", "format": "int32"},
                    "x-kubernetes-list-type": "set",
                },
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "mode": {"type": "string", "enum": ["A", "B"], "default": "A", "maxLength": 3},
                "free": {"type": "object", "additionalProperties": True},
            },
            "x-kubernetes-group-version-kind": [{"group": "g.io", "kind": "Thing", "version": "v1"}],
        },
        "io.g.v1.ThingSpec": {"type": "object", "x-kubernetes-map-type": "atomic"},
    },
    "security": [{"BearerToken": []}],
    "securityDefinitions": {
        "BearerToken": {"type": "apiKey", "name": "authorization", "in": "header", "description": "token"}
    },
}


def named(pairs: Any, name: str) -> Any:
    return next(pair.value for pair in pairs if pair.name == name)


def extensions(message: Any) -> dict[str, Any]:
    return {ext.name: yaml.safe_load(ext.value.yaml) for ext in message.vendor_extension}


def test_small_document_round_trip() -> None:
    doc = decode(openapi_v2_to_protobuf(SMALL_DOC))
    assert doc.swagger == "2.0"
    assert doc.info.title == "Kubernetes" and doc.info.version == "v1.33.0"
    item = named(doc.paths.path, "/apis/g.io/v1/namespaces/{namespace}/things/{name}")
    path_name = item.parameters[0].parameter.non_body_parameter.path_parameter_sub_schema
    assert (path_name.name, path_name.required, getattr(path_name, "in")) == ("name", True, "path")
    assert item.parameters[1].json_reference._ref == "#/parameters/pretty"
    patch = item.patch
    assert patch.operation_id == "patchGIoV1NamespacedThing"
    assert list(patch.consumes) == ["application/merge-patch+json"]
    body = patch.parameters[0].parameter.body_parameter
    assert body.name == "body" and body.required and body.schema._ref == "#/definitions/Patch"
    query = patch.parameters[1].parameter.non_body_parameter.query_parameter_sub_schema
    assert query.name == "fieldValidation" and query.type == "string" and query.unique_items
    assert extensions(patch) == {
        "x-kubernetes-action": "patch",
        "x-kubernetes-group-version-kind": {"group": "g.io", "kind": "Thing", "version": "v1"},
    }
    ok = named(patch.responses.response_code, "200").response
    assert ok.description == "OK" and ok.schema.schema._ref == "#/definitions/io.g.v1.Thing"
    assert named(patch.responses.response_code, "401").response.description == "Unauthorized"

    thing = named(doc.definitions.additional_properties, "io.g.v1.Thing")
    assert list(thing.type.value) == ["object"]
    assert list(thing.required) == ["spec"]
    assert extensions(thing) == {
        "x-kubernetes-group-version-kind": [{"group": "g.io", "kind": "Thing", "version": "v1"}]
    }
    props = thing.properties.additional_properties
    spec = named(props, "spec")
    assert spec._ref == "#/definitions/io.g.v1.ThingSpec" and spec.description == "the spec"
    ports = named(props, "ports")
    assert len(ports.items.schema) == 1 and ports.items.schema[0].format == "int32"
    assert extensions(ports) == {"x-kubernetes-list-type": "set"}
    labels = named(props, "labels")
    assert list(labels.additional_properties.schema.type.value) == ["string"]
    assert named(props, "free").additional_properties.boolean is True
    mode = named(props, "mode")
    assert [yaml.safe_load(e.yaml) for e in mode.enum] == ["A", "B"]
    assert yaml.safe_load(mode.default.yaml) == "A" and mode.max_length == 3
    spec_def = named(doc.definitions.additional_properties, "io.g.v1.ThingSpec")
    assert extensions(spec_def) == {"x-kubernetes-map-type": "atomic"}

    bearer = named(doc.security_definitions.additional_properties, "BearerToken").api_key_security
    assert (bearer.type, bearer.name, getattr(bearer, "in")) == ("apiKey", "authorization", "header")
    assert list(doc.security[0].additional_properties[0].value.value) == []


def test_yaml_text_matches_go_encoder_shapes() -> None:
    assert to_yaml("merge") == "merge\n"
    assert to_yaml(["name", "protocol"]) == "- name\n- protocol\n"
    assert to_yaml([{"group": "apps", "kind": "Deployment", "version": "v1"}]) == (
        "- group: apps\n  kind: Deployment\n  version: v1\n"
    )
    assert yaml.safe_load(to_yaml({"group": "", "kind": "Pod", "version": "v1"})) == {
        "group": "",
        "kind": "Pod",
        "version": "v1",
    }


def test_bad_parameter_location_is_rejected() -> None:
    with pytest.raises(ValueError, match="cookie"):
        parameter_message({"in": "cookie", "name": "x", "type": "string"})


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


def test_full_document_encodes_fast_and_kubectl_can_use_it() -> None:
    resources = [
        ResourceInfo(
            "apps", "v1", "Deployment", "deployments", "deployment", True, subresources=("status", "scale")
        ),
        ResourceInfo("", "v1", "Pod", "pods", "pod", True, subresources=("status",)),
    ]
    v2 = build_openapi_v2(resources, builtin_definitions())
    data = openapi_v2_to_protobuf(v2)
    assert openapi_v2_to_protobuf(v2) is data  # cached per document
    doc = decode(data)
    assert len(doc.definitions.additional_properties) == len(v2["definitions"])
    # kubectl's v2 query-param check: the PATCH of the GVK lists fieldValidation as a query parameter
    found = False
    for pair in doc.paths.path:
        patch = pair.value.patch
        if not patch.operation_id:
            continue
        if extensions(patch).get("x-kubernetes-group-version-kind") == {
            "group": "apps",
            "kind": "Deployment",
            "version": "v1",
        }:
            names = [p.parameter.non_body_parameter.query_parameter_sub_schema.name for p in patch.parameters]
            found = "fieldValidation" in names
            break
    assert found
    # patch strategy metadata kubectl apply reads from the definitions
    pod_spec = named(doc.definitions.additional_properties, "io.k8s.api.core.v1.PodSpec")
    containers = named(pod_spec.properties.additional_properties, "containers")
    assert extensions(containers)["x-kubernetes-patch-merge-key"] == "name"
    assert extensions(containers)["x-kubernetes-patch-strategy"] == "merge"
    assert containers.items.schema[0]._ref == "#/definitions/io.k8s.api.core.v1.Container"


def test_ensure_generated_skips_fresh_outputs() -> None:
    protogen.ensure_generated()
    stamp = protogen.GENERATED_DIR / ".stamp"
    before = stamp.stat().st_mtime_ns
    protogen.ensure_generated()
    assert stamp.stat().st_mtime_ns == before
    assert (protogen.GENERATED_DIR / "gnostic" / "__init__.py").exists()


def test_generator_handles_cross_file_imports(tmp_path: Path) -> None:
    protos = tmp_path / "protos"
    (protos / "kctest" / "common").mkdir(parents=True)
    (protos / "kctest" / "common" / "shared.proto").write_text(
        'syntax = "proto3";\npackage kctest.common;\nmessage Shared { string value = 1; }\n'
    )
    (protos / "kctest" / "user.proto").write_text(
        'syntax = "proto3";\npackage kctest;\nimport "kctest/common/shared.proto";\n'
        "message User { kctest.common.Shared shared = 1; }\n"
    )
    out = tmp_path / "kctestgen"
    protogen.ensure_generated(protos, out, "kctestgen")
    assert (out / "__init__.py").exists() and (out / "kctest" / "common" / "__init__.py").exists()
    text = (out / "kctest" / "user_pb2.py").read_text()
    assert "from kctestgen.kctest.common import shared_pb2" in text
    sys.path.insert(0, str(tmp_path))
    try:
        user_module = importlib.import_module("kctestgen.kctest.user_pb2")
        message = user_module.User()
        message.shared.value = "x"
        assert user_module.User.FromString(message.SerializeToString()).shared.value == "x"
    finally:
        sys.path.remove(str(tmp_path))

    # outputs newer than inputs: nothing is regenerated
    stamp_time = (out / ".stamp").stat().st_mtime_ns
    protogen.ensure_generated(protos, out, "kctestgen")
    assert (out / ".stamp").stat().st_mtime_ns == stamp_time
    # a touched input regenerates
    shared = protos / "kctest" / "common" / "shared.proto"
    os.utime(shared, ns=(stamp_time + 10_000_000_000, stamp_time + 10_000_000_000))
    protogen.ensure_generated(protos, out, "kctestgen")
    assert (out / ".stamp").stat().st_mtime_ns != stamp_time


def test_generator_reports_invalid_protos(tmp_path: Path) -> None:
    (tmp_path / "bad.proto").write_text('syntax = "proto3";\nmessage Broken { nope value = 1; }\n')
    with pytest.raises(protogen.ProtoGenerationError):
        protogen.ensure_generated(tmp_path, tmp_path / "out", "kcbadgen")
    assert not (tmp_path / "out" / ".stamp").exists()


def test_proto_dir_env_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(protogen.PROTO_DIR_ENV, str(tmp_path))
    assert protogen.proto_dir() == tmp_path.resolve()
    monkeypatch.delenv(protogen.PROTO_DIR_ENV)
    assert protogen.proto_dir() == protogen.REPO_ROOT / "proto"
    assert (protogen.proto_dir() / "gnostic" / "openapi_v2.proto").exists()
