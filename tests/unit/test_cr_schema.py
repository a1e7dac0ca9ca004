"""CRSchema: pruning, defaulting and value validation of custom resources with kube-apiserver's messages."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from extensionsapi.schema import CRSchema
from genericapi.apimachinery.gofmt import go_float

DATA = Path(__file__).resolve().parent.parent / "data" / "crds"

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["image"],
            "properties": {
                "image": {"type": "string", "enum": ["nginx", "redis"]},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
                "cronSpec": {"type": "string", "pattern": r"^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$"},
                "ratio": {"type": "number", "exclusiveMaximum": True, "maximum": 1.5},
                "id": {"type": "string", "format": "uuid"},
                "when": {"type": "string", "format": "date-time"},
                "port": {"x-kubernetes-int-or-string": True},
                "note": {"type": "string", "nullable": True},
                "name": {"type": "string", "maxLength": 3, "minLength": 2},
                "tags": {"type": "array", "maxItems": 2, "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "required": ["name"], "properties": {
                              "name": {"type": "string"}, "protocol": {"type": "string", "default": "TCP"}}}},
                "labels": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                          "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}},
                "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                             "x-kubernetes-preserve-unknown-fields": True},
                "choice": {"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
                           "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
                "nested": {"type": "object", "default": {}, "properties": {
                    "level": {"type": "string", "default": "info"}}},
            },
        },
    },
}


def _obj(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "a", "namespace": "default"},
            "spec": {"image": "nginx", **spec}}


def _msgs(schema: CRSchema, obj: dict[str, Any]) -> list[str]:
    return [str(e) for e in schema.validate(obj)]


def test_valid_object_has_no_errors() -> None:
    s = CRSchema(SCHEMA)
    obj = _obj(replicas=3, id="123e4567-e89b-12d3-a456-426614174000", when="2024-01-02T03:04:05Z", port="http",
               ratio=1.0, note=None, tags=["a", "b"], name="ab")
    assert _msgs(s, obj) == []


def test_integer_limits_and_messages() -> None:
    s = CRSchema(SCHEMA)
    assert _msgs(s, _obj(replicas=15)) == [
        "spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10"]
    assert _msgs(s, _obj(replicas=0)) == [
        "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1"]


def test_exclusive_maximum_and_float_rendering() -> None:
    s = CRSchema(SCHEMA)
    assert _msgs(s, _obj(ratio=1.5)) == ["spec.ratio: Invalid value: 1.5: spec.ratio in body should be less than 1.5"]
    assert _msgs(s, _obj(ratio=2.0)) == ["spec.ratio: Invalid value: 2: spec.ratio in body should be less than 1.5"]


def test_type_errors_report_the_actual_type() -> None:
    s = CRSchema(SCHEMA)
    errs = s.validate(_obj(cronSpec=5, replicas="3"))
    assert [str(e) for e in errs] == [
        'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"',
        'spec.cronSpec: Invalid value: "integer": spec.cronSpec in body must be of type string: "integer"',
    ]
    assert {e.reason for e in errs} == {"FieldValueTypeInvalid"}


def test_integer_accepts_integral_float_and_int_or_string_rejects_float() -> None:
    s = CRSchema(SCHEMA)
    assert _msgs(s, _obj(replicas=3.0)) == []
    assert _msgs(s, _obj(port=1.5)) == [
        'spec.port: Invalid value: "number": spec.port in body must be of type integer,string: "number"']


def test_null_only_where_nullable() -> None:
    s = CRSchema(SCHEMA)
    assert _msgs(s, _obj(note=None)) == []
    assert _msgs(s, _obj(name=None)) == [
        'spec.name: Invalid value: "null": spec.name in body must be of type string: "null"']


def test_pattern_enum_required() -> None:
    s = CRSchema(SCHEMA)
    obj = _obj(cronSpec="* * * *")
    obj["spec"]["image"] = "httpd"
    assert _msgs(s, obj) == [  # in the schema's property order
        'spec.image: Unsupported value: "httpd": supported values: "nginx", "redis"',
        'spec.cronSpec: Invalid value: "* * * *": spec.cronSpec in body should match '
        r"'^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'",
    ]
    missing = _obj()
    del missing["spec"]["image"]
    errs = s.validate(missing)
    assert [str(e) for e in errs] == ["spec.image: Required value"]
    assert errs[0].reason == "FieldValueRequired"


def test_formats() -> None:
    s = CRSchema(SCHEMA)
    assert _msgs(s, _obj(id="nope", when="yesterday")) == [
        'spec.id: Invalid value: "nope": spec.id in body must be of type uuid: "nope"',
        'spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday"',
    ]


def test_lengths_items_properties() -> None:
    s = CRSchema(SCHEMA)
    assert _msgs(s, _obj(name="abcd", tags=["a", "b", "c"], labels={"x": "1", "y": "2"})) == [
        "spec.name: Too long: may not be more than 3 bytes",
        "spec.tags: Too many: 3: must have at most 2 items",
        "spec.labels: Too many: 2: must have at most 1 items".replace("1 items", "1 item"),
    ]
    assert _msgs(s, _obj(name="a")) == [
        'spec.name: Invalid value: "a": spec.name in body should be at least 2 chars long']


def test_one_of_reports_composite_error_at_nil_path() -> None:
    s = CRSchema(SCHEMA)
    msgs = _msgs(s, _obj(choice={}))
    assert msgs[0] == ('<nil>: Invalid value: "": "spec.choice" must validate one and only one schema (oneOf). '
                       "Found none valid")
    assert _msgs(s, _obj(choice={"a": "x", "b": "y"}))[0].endswith("Found 2 valid alternatives")
    assert _msgs(s, _obj(choice={"a": "x"})) == []


def test_list_type_set_and_map_duplicates() -> None:
    s = CRSchema(SCHEMA)
    assert _msgs(s, _obj(tags=["a", "a"])) == ['spec.tags[1]: Duplicate value: "a"']
    assert _msgs(s, _obj(ports=[{"name": "http"}, {"name": "http"}])) == [
        'spec.ports[1]: Duplicate value: map[string]interface {}{"name":"http"}']


def test_update_ratchets_list_uniqueness_only_when_old_was_valid() -> None:
    s = CRSchema(SCHEMA)
    bad = _obj(tags=["a", "a"])
    assert s.validate_update(bad, _obj(tags=["a"])) != []
    assert s.validate_update(bad, copy.deepcopy(bad)) == []


def test_embedded_resource_requires_apiversion_and_kind() -> None:
    s = CRSchema(SCHEMA)
    assert _msgs(s, _obj(template={"metadata": {"name": "x"}})) == [
        "spec.template.apiVersion: Required value: must not be empty",
        "spec.template.kind: Required value: must not be empty",
    ]
    assert _msgs(s, _obj(template={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "Bad_Name/"}})) == [
        "spec.template.metadata.name: Invalid value: \"Bad_Name/\": may not contain '/'"]


def test_prune_reports_paths_and_keeps_preserved_fields() -> None:
    s = CRSchema(SCHEMA)
    obj = _obj(bogus=1, ports=[{"name": "a", "junk": True}],
               extra={"anything": {"deep": 1}, "known": {"a": "x", "b": "dropped"}},
               template={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "weird": 1}, "spec": {"x": 1}})
    obj["metadata"]["unknownMeta"] = "x"
    obj["topLevel"] = 1
    pruned = s.prune(obj)
    assert sorted(pruned) == sorted(["metadata.unknownMeta", "spec.bogus", "spec.ports[0].junk",
                                     "spec.extra.known.b", "spec.template.metadata.weird", "topLevel"])
    assert obj["spec"]["extra"] == {"anything": {"deep": 1}, "known": {"a": "x"}}
    assert obj["spec"]["template"]["spec"] == {"x": 1}
    assert obj["apiVersion"] == "example.com/v1" and obj["kind"] == "Thing"


def test_preserve_unknown_at_root() -> None:
    s = CRSchema({"type": "object"}, preserve_unknown_at_root=True)
    obj = {"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"}, "anything": {"x": 1}}
    assert s.prune(obj) == []
    assert obj["anything"] == {"x": 1}


def test_defaulting_nested_arrays_and_nulls() -> None:
    s = CRSchema(SCHEMA)
    obj = _obj(ports=[{"name": "a"}, {"name": "b", "protocol": "UDP"}], replicas=None, name=None)
    s.default(obj)
    spec = obj["spec"]
    assert spec["replicas"] == 1  # null in a non-nullable field with a default gets the default
    assert "name" not in spec  # null in a non-nullable field without a default is dropped
    assert spec["ports"] == [{"name": "a", "protocol": "TCP"}, {"name": "b", "protocol": "UDP"}]
    assert spec["nested"] == {"level": "info"}  # the default {} is itself defaulted
    spec["nested"]["level"] = "debug"
    s.default(obj)
    assert spec["nested"]["level"] == "debug"


def test_defaults_are_deep_copies() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "list": {"type": "array", "items": {"type": "string"}, "default": ["a"]}}}}}
    s = CRSchema(schema)
    one: dict[str, Any] = {"spec": {}}
    two: dict[str, Any] = {"spec": {}}
    s.default(one)
    s.default(two)
    one["spec"]["list"].append("b")
    assert two["spec"]["list"] == ["a"]


def test_real_world_shapes_validate_sample_objects() -> None:
    cert = yaml.safe_load((DATA / "certificates.cert-manager.io.yaml").read_text())
    s = CRSchema(cert["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    obj: dict[str, Any] = {
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": {"name": "c", "namespace": "d"},
           "spec": {"secretName": "s", "issuerRef": {"name": "i"}, "usages": ["server auth", "bogus"],
                    "privateKey": {"algorithm": "DSA"}}}
    assert [str(e) for e in s.validate(obj)] == [
        'spec.privateKey.algorithm: Unsupported value: "DSA": supported values: "RSA", "ECDSA", "Ed25519"',
        'spec.usages[1]: Unsupported value: "bogus": supported values: ' + ", ".join(
            f'"{u}"' for u in cert["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["usages"]["items"]["enum"]),
    ]
    smon = yaml.safe_load((DATA / "servicemonitors.monitoring.coreos.com.yaml").read_text())
    s = CRSchema(smon["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    obj = {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": {"name": "m"},
           "spec": {"selector": {}, "endpoints": [{"targetPort": 8080, "interval": "30s", "relabelings": [{}]}]}}
    s.default(obj)
    assert obj["spec"]["endpoints"][0]["relabelings"] == [{"action": "replace"}]
    assert s.validate(obj) == []
    obj["spec"]["endpoints"][0]["interval"] = "30 seconds"
    assert [e.field for e in s.validate(obj)] == ["spec.endpoints[0].interval"]


def test_go_float_formatting() -> None:
    assert [go_float(v) for v in (1.0, 1.5, 1e6, 123456.0, 1e-5, 0.0001, -2.5, 1e21)] == [
        "1", "1.5", "1e+06", "123456", "1e-05", "0.0001", "-2.5", "1e+21"]
