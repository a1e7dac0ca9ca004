"""CustomResourceDefinition validation: names, versions, structural schemas, defaults, columns, conversion."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from extensionsapi.crdvalidation import default_crd, validate_crd, validate_crd_update

DATA = Path(__file__).resolve().parent.parent / "data" / "crds"


def _load(name: str) -> dict[str, Any]:
    return yaml.safe_load((DATA / name).read_text())


def _crd(schema: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    version: dict[str, Any] = {"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": schema or {"type": "object"}}}
    body: dict[str, Any] = {"group": "example.com", "scope": "Namespaced",
                            "names": {"plural": "widgets", "kind": "Widget"}, "versions": [version]}
    body.update(spec)
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"}, "spec": body}


def _msgs(crd: dict[str, Any]) -> list[str]:
    return [str(e) for e in validate_crd(crd)]


@pytest.mark.parametrize("name", ["certificates.cert-manager.io.yaml", "servicemonitors.monitoring.coreos.com.yaml",
                                  "applications.argoproj.io.yaml"])
def test_real_world_crds_are_valid(name: str) -> None:
    assert validate_crd(_load(name)) == []


def test_bad_crd_files() -> None:
    assert _msgs(_load("bad/wrong-name.yaml")) == [
        'metadata.name: Invalid value: "gadgets.bad.example.com": must be spec.names.plural+"."+spec.group']
    assert _msgs(_load("bad/nonstructural.yaml")) == [
        "spec.validation.openAPIV3Schema.properties[spec].oneOf[0].type: Forbidden: must be empty to be structural",
        "spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified "
        "object fields",
    ]
    dup = _msgs(_load("bad/duplicate-versions.yaml"))
    assert len(dup) == 1 and dup[0].startswith("spec.versions: Invalid value: ")
    assert dup[0].endswith(": must contain unique version names")
    two = _msgs(_load("bad/two-storage-versions.yaml"))
    assert two[0].endswith(": must have exactly one version marked as storage version")
    assert two[1] == 'status.storedVersions: Invalid value: []string{"v1"}: must have the storage version v2'
    assert _msgs(_load("bad/bad-printer-column.yaml")) == [
        'spec.additionalPrinterColumns[0].type: Invalid value: "text": must be one of boolean,date,integer,number,'
        "string",
        'spec.additionalPrinterColumns[0].format: Invalid value: "percent": must be one of byte,date,date-time,double,'
        "float,int32,int64,password",
    ]


def test_defaults_fill_names_conversion_and_stored_versions() -> None:
    crd = default_crd(_crd())
    assert crd["spec"]["names"]["singular"] == "widget"
    assert crd["spec"]["names"]["listKind"] == "WidgetList"
    assert crd["spec"]["conversion"] == {"strategy": "None"}
    assert crd["status"]["storedVersions"] == ["v1"]


def test_group_scope_and_names() -> None:
    crd = _crd(group="example", scope="Global")
    crd["metadata"]["name"] = "widgets.example"
    crd["spec"]["names"] = {"plural": "Widgets", "kind": "Widget", "listKind": "Widget", "shortNames": ["w_1"],
                            "categories": ["All"]}
    crd["metadata"]["name"] = "Widgets.example"
    assert _msgs(crd) == [
        'metadata.name: Invalid value: "Widgets.example": a lowercase RFC 1123 subdomain must consist of lower case '
        "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
        "'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*"
        "[a-z0-9])?)*')",
        'spec.group: Invalid value: "example": should be a domain with at least one dot',
        'spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced"',
        'spec.names.plural: Invalid value: "Widgets": a DNS-1035 label must consist of lower case alphanumeric '
        "characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. "
        "'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        'spec.names.shortNames[0]: Invalid value: "w_1": a DNS-1035 label must consist of lower case alphanumeric '
        "characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. "
        "'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        'spec.names.listKind: Invalid value: "Widget": kind and listKind may not be the same',
        'spec.names.categories[0]: Invalid value: "All": a DNS-1035 label must consist of lower case alphanumeric '
        "characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. "
        "'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
    ]


def test_missing_schema_and_kind() -> None:
    crd = _crd()
    del crd["spec"]["versions"][0]["schema"]
    del crd["spec"]["names"]["kind"]
    assert _msgs(crd) == [
        "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required",
        "spec.names.singular: Required value",
        "spec.names.kind: Required value",
        "spec.names.listKind: Required value",
    ]


def test_protected_group_needs_approval() -> None:
    crd = _crd(group="widgets.k8s.io")
    crd["metadata"]["name"] = "widgets.widgets.k8s.io"
    assert _msgs(crd) == [
        "metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval "
        'annotation "api-approved.kubernetes.io", see https://github.com/kubernetes/enhancements/pull/1111']
    crd["metadata"]["annotations"] = {"api-approved.kubernetes.io": "sure"}
    assert _msgs(crd)[0].startswith('metadata.annotations[api-approved.kubernetes.io]: Invalid value: "sure": ')
    crd["metadata"]["annotations"] = {"api-approved.kubernetes.io": "https://github.com/kubernetes/kubernetes/pull/1"}
    assert _msgs(crd) == []
    crd["metadata"]["annotations"] = {"api-approved.kubernetes.io": "unapproved, testing"}
    assert _msgs(crd) == []


STRUCTURAL_CASES = [
    ({"type": "object", "properties": {"spec": {"type": "object", "properties": {"list": {"type": "array"}}}}},
     ["spec.validation.openAPIV3Schema.properties[spec].properties[list].items: Required value: must be specified"]),
    ({"type": "string"}, ['spec.validation.openAPIV3Schema.type: Invalid value: "string": must be object at the root']),
    ({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}},
     ["spec.validation.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name "
      "and generateName, but metadata is implicitly specified"]),
    ({"type": "object", "properties": {"spec": {"type": "object", "anyOf": [{"properties": {"x": {}}}]}}},
     []),  # completeness is only checked at the root
    ({"type": "object", "anyOf": [{"properties": {"x": {}}}]},
     ["spec.validation.openAPIV3Schema.properties[x]: Required value: because it is defined in "
      "spec.validation.openAPIV3Schema.anyOf[0].properties[x]"]),
    ({"type": "object", "properties": {"e": {"type": "object", "x-kubernetes-embedded-resource": True}}},
     ["spec.validation.openAPIV3Schema.properties[e].properties: Required value: must not be empty if "
      "x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"]),
    ({"type": "object", "properties": {"p": {"x-kubernetes-int-or-string": True,
                                             "anyOf": [{"type": "integer"}, {"type": "string"}]}}}, []),
    ({"type": "object", "properties": {"p": {"type": "string", "pattern": "(?=a)"}}},
     ["spec.validation.openAPIV3Schema.properties[p].pattern: Invalid value: \"(?=a)\": must be a valid regular "
      "expression, but isn't: error parsing regexp: invalid or unsupported Perl syntax: `(?=a)`"]),
]


@pytest.mark.parametrize(("schema", "expected"), STRUCTURAL_CASES)
def test_structural_rules(schema: dict[str, Any], expected: list[str]) -> None:
    assert _msgs(_crd(schema)) == expected


def test_openapi_subset_rules() -> None:
    schema = {"type": "object", "properties": {
        "a": {"type": "array", "uniqueItems": True, "items": {"type": "string"}},
        "b": {"type": "object", "x-kubernetes-preserve-unknown-fields": False},
        "c": {"type": "string", "x-kubernetes-list-type": "set"},
        "d": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
              "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
        "e": {"type": "object", "additionalProperties": {"type": "string"}, "properties": {"x": {"type": "string"}}},
    }}
    prefix = "spec.validation.openAPIV3Schema.properties"
    assert _msgs(_crd(schema)) == [
        f"{prefix}[a].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes "
        "quadratic",
        f"{prefix}[b].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined",
        f'{prefix}[c].type: Invalid value: "string": must be array if x-kubernetes-list-type is specified',
        f"{prefix}[d].items.properties[k].default: Required value: this property is in x-kubernetes-list-map-keys, "
        "so it must have a default or be a required property",
        f"{prefix}[e].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
    ]


def test_defaults_must_validate_and_be_pruned() -> None:
    schema = {"type": "object", "properties": {
        "metadata": {"type": "object"},
        "spec": {"type": "object", "properties": {
            "replicas": {"type": "integer", "maximum": 5, "default": 10},
            "obj": {"type": "object", "properties": {"a": {"type": "string"}}, "default": {"a": "x", "zz": 1}},
        }}}}
    prefix = "spec.validation.openAPIV3Schema.properties[spec].properties"
    assert _msgs(_crd(schema)) == [
        f"{prefix}[replicas].default: Invalid value: 10:  in body should be less than or equal to 5",
        f'{prefix}[obj].default: Invalid value: map[string]interface {{}}{{"a":"x", "zz":1}}: must not have unknown '
        "fields",
    ]
    meta_default = _crd({"type": "object", "properties": {"metadata": {"type": "object", "default": {}}}})
    assert _msgs(meta_default)[-1] == ("spec.validation.openAPIV3Schema.properties[metadata].default: Forbidden: must "
                                       "not be set in top-level metadata")


def test_status_subresource_restricts_root() -> None:
    crd = _crd({"type": "object", "anyOf": [{"required": ["spec"]}], "properties": {"spec": {"type": "object"}}})
    crd["spec"]["versions"][0]["subresources"] = {"status": {}}
    msgs = _msgs(crd)
    assert len(msgs) == 1
    assert msgs[0].startswith("spec.validation.openAPIV3Schema: Invalid value: ")
    assert msgs[0].endswith("fields are allowed at the root of the schema if the status subresource is enabled")


def test_subresources_scale_paths() -> None:
    crd = _crd()
    crd["spec"]["versions"][0]["subresources"] = {"scale": {"specReplicasPath": ".status.replicas",
                                                            "statusReplicasPath": "status.replicas",
                                                            "labelSelectorPath": ".metadata.labels"}}
    assert _msgs(crd) == [
        'spec.subresources.scale.specReplicasPath: Invalid value: ".status.replicas": should be a json path under '
        ".spec",
        'spec.subresources.scale.statusReplicasPath: Invalid value: "status.replicas": must be a simple json path '
        "starting with .",
        'spec.subresources.scale.labelSelectorPath: Invalid value: ".metadata.labels": should be a json path under '
        "either .spec or .status",
    ]


def test_per_version_paths_when_schemas_differ() -> None:
    crd = _crd({"type": "object"})
    crd["spec"]["versions"].append({"name": "v2", "served": True, "storage": False,
                                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {"x": {}}}},
                                    "additionalPrinterColumns": [{"name": "X", "type": "string", "jsonPath": "x"}]})
    assert _msgs(crd) == [
        "spec.versions[1].schema.openAPIV3Schema.properties[x].type: Required value: must not be empty for specified "
        "object fields",
        'spec.versions[1].additionalPrinterColumns[0].JSONPath: Invalid value: "x": must be a simple json path '
        "starting with .",
    ]


def test_selectable_fields() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "color": {"type": "string"}, "size": {"type": "object"}}}}}
    crd = _crd(schema)
    crd["spec"]["versions"][0]["selectableFields"] = [{"jsonPath": ".spec.color"}, {"jsonPath": ".spec.size"},
                                                       {"jsonPath": ".spec.nope"}, {"jsonPath": ".spec.color"}]
    assert _msgs(crd) == [
        'spec.versions[0].selectableFields[1].jsonPath: Invalid value: ".spec.size": must point to a field of type '
        "string, boolean or integer. Enum string fields and strings with formats are allowed.",
        'spec.versions[0].selectableFields[2].jsonPath: Invalid value: ".spec.nope": is an invalid path: does not '
        "refer to a valid field",
        'spec.versions[0].selectableFields[3].jsonPath: Duplicate value: ".spec.color"',
    ]


def test_conversion_webhook_rules() -> None:
    crd = _crd(conversion={"strategy": "Webhook"})
    assert _msgs(crd) == [
        "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
        "spec.conversion.conversionReviewVersions: Required value",
    ]
    crd = _crd(conversion={"strategy": "Webhook", "webhook": {
        "clientConfig": {"url": "http://conv.example.com/x?y=1", "service": None},
        "conversionReviewVersions": ["v2"]}})
    assert _msgs(crd) == [
        'spec.conversion.webhookClientConfig.url: Invalid value: "http": \'https\' is the only allowed URL scheme; '
        "desired format: https://host[/path]",
        'spec.conversion.webhookClientConfig.url: Invalid value: "y=1": query parameters are not permitted in the URL',
        'spec.conversion.conversionReviewVersions: Invalid value: []string{"v2"}: must include at least one of v1, '
        "v1beta1",
    ]
    crd = _crd(conversion={"strategy": "Webhook", "webhook": {
        "clientConfig": {"service": {"name": "conv", "namespace": "ns", "path": "/Convert"}},
        "conversionReviewVersions": ["v1", "v1"]}})
    assert [m.split(":")[0] for m in _msgs(crd)] == ["spec.conversion.webhookClientConfig.service.path",
                                                      "spec.conversion.conversionReviewVersions[1]"]
    crd = _crd(conversion={"strategy": "None", "webhook": {"conversionReviewVersions": ["v1"]}})
    assert _msgs(crd) == ["spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is "
                          "not set to Webhook"]


def test_update_rules() -> None:
    old = default_crd(_crd())
    old["status"]["conditions"] = [{"type": "Established", "status": "True"}]
    new = copy.deepcopy(old)
    new["spec"]["scope"] = "Cluster"
    new["spec"]["group"] = "other.com"
    assert [str(e) for e in validate_crd_update(new, old)] == [
        'spec.scope: Invalid value: "Cluster": field is immutable',
        'spec.group: Invalid value: "other.com": field is immutable',
    ]
    new = copy.deepcopy(old)
    new["spec"]["versions"][0]["name"] = "v2"
    assert [str(e) for e in validate_crd_update(new, old)] == [
        'status.storedVersions: Invalid value: []string{"v1"}: must have the storage version v2',
        'status.storedVersions[0]: Invalid value: "v1": missing from spec.versions; v1 was previously a storage '
        "version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v1 "
        "and removes v1 from status.storedVersions",
    ]
    assert validate_crd_update(copy.deepcopy(old), old) == []


def test_a_bad_cel_rule_rejects_the_crd_when_it_is_written() -> None:
    schema = {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"replicas": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.replicas <= ", "message": "too many"}]}}}
    msgs = _msgs(_crd(schema))
    assert len(msgs) == 1
    assert msgs[0].startswith(
        "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: ")
    assert "compilation failed: ERROR: <input>:1:" in msgs[0]
    schema["properties"]["spec"]["x-kubernetes-validations"][0]["rule"] = "self.replicas <= 10"
    assert _msgs(_crd(schema)) == []
