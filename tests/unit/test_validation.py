"""Schema checks of built-in objects and apimachinery's name/metadata validators."""

from __future__ import annotations

from typing import Any

import pytest
from coreapi import catalog
from coreapi.strategies import strategy_for
from genericapi.apimachinery.decoding import decode_body
from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.apimachinery.validation import (
    decode_error_message,
    strict_decoding_error,
    strict_field_messages,
    validate_dns1123_label,
    validate_dns1123_subdomain,
    validate_label_key,
    validate_label_value,
    validate_object,
    validate_object_meta,
)

CATALOG = SchemaCatalog.load()
CU = "json: cannot unmarshal "
_LABEL_REGEX_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
                    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


def _deploy_error(obj: dict) -> str | None:
    return validate_object(obj, CATALOG, "apps", "v1", "Deployment").decode_error


@pytest.mark.parametrize(("obj", "message"), [
    ({"spec": {"replicas": "3"}},
     CU + "string into Go struct field DeploymentSpec.spec.replicas of type int32"),
    ({"spec": {"replicas": 1.5}},
     CU + "number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32"),
    ({"spec": {"replicas": 2**40}},
     CU + f"number {2**40} into Go struct field DeploymentSpec.spec.replicas of type int32"),
    ({"spec": "x"}, CU + "string into Go struct field Deployment.spec of type v1.DeploymentSpec"),
    ({"metadata": {"labels": {"a": 1}}},
     CU + "number into Go struct field ObjectMeta.metadata.labels of type string"),
    ({"spec": {"template": {"spec": {"containers": ["x"]}}}},
     CU + "string into Go struct field PodSpec.spec.template.spec.containers of type v1.Container"),
    ({"spec": {"template": {"spec": {"containers": [{"name": "a", "env": [{"name": "E", "value": 1}]}]}}}},
     CU + "number into Go struct field EnvVar.spec.template.spec.containers.env.value of type string"),
    ({"spec": {"paused": "yes"}},
     CU + "string into Go struct field DeploymentSpec.spec.paused of type bool"),
    ({"spec": {"strategy": {"rollingUpdate": {"maxSurge": True}}}},
     CU + "bool into Go value of type int32"),
    ({"spec": {"template": {"spec": {"containers": [
        {"name": "a", "resources": {"limits": {"cpu": "lots"}}}]}}}},
     "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
    ({"metadata": {"creationTimestamp": "yesterday"}},
     'parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"'),
])
def test_type_mismatches_are_decode_errors(obj: dict, message: str) -> None:
    assert _deploy_error(obj) == message


def test_only_first_type_error_is_reported_and_nulls_are_fine() -> None:
    obj = {"spec": {"replicas": "x", "paused": "y", "minReadySeconds": None}}
    assert _deploy_error(obj) == (
        CU + "string into Go struct field DeploymentSpec.spec.replicas of type int32")
    fine = {"spec": {"replicas": None, "strategy": {"rollingUpdate": {"maxSurge": "25%"}}}}
    assert _deploy_error(fine) is None


def test_valid_quantities_and_times() -> None:
    obj = {"metadata": {"creationTimestamp": "2024-01-01T00:00:00Z"},
           "spec": {"template": {"spec": {"containers": [
               {"name": "a", "resources": {"limits": {"cpu": "500m", "memory": 1024}}}]}}}}
    assert _deploy_error(obj) is None


def test_secret_data_must_be_base64() -> None:
    result = validate_object({"data": {"k": "!!!"}}, CATALOG, "", "v1", "Secret")
    assert result.decode_error == "illegal base64 data at input byte 0"
    assert validate_object({"data": {"k": "aGk="}}, CATALOG, "", "v1", "Secret").decode_error is None


def test_decode_error_message_wraps_like_the_apiserver() -> None:
    assert decode_error_message("Deployment", "v1", "boom") == (
        'Deployment in version "v1" cannot be handled as a Deployment: boom')


def test_required_fields() -> None:
    result = validate_object({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}},
                             CATALOG, "apps", "v1", "Deployment")
    assert sorted(str(e) for e in result.errors) == [
        "spec.selector: Required value",
        "spec.template.spec.containers[0].name: Required value",
    ]


def test_unknown_fields_and_strict_messages_match_kube_apiserver() -> None:
    body = b"""{"apiVersion":"apps/v1","kind":"Deployment",
      "metadata":{"name":"dupename","name":"x","labels":{"app":"nginx"},"unknownMeta":"metaVal"},
      "spec":{"unknown1":"val1","unknownDupe":"valDupe","unknownDupe":"valDupe2","paused":true,"paused":false,
        "selector":{"matchLabels":{"app":"nginx"}},
        "template":{"metadata":{"labels":{"app":"nginx"}},"spec":{"containers":[{"name":"nginx",
          "image":"nginx:latest","unknownNested":"val1","imagePullPolicy":"Always","imagePullPolicy":"Never"}]}}}}"""
    obj, duplicates = decode_body(body, "application/json", detect_duplicates=True)
    result = validate_object(obj, CATALOG, "apps", "v1", "Deployment")
    assert result.unknown_fields == ["metadata.unknownMeta", "spec.unknown1", "spec.unknownDupe",
                                     "spec.template.spec.containers[0].unknownNested"]
    messages = strict_field_messages(obj, duplicates, result.unknown_fields)
    assert strict_decoding_error(messages) == (
        'strict decoding error: duplicate field "metadata.name", unknown field "metadata.unknownMeta", '
        'unknown field "spec.unknown1", unknown field "spec.unknownDupe", duplicate field "spec.paused", '
        'unknown field "spec.template.spec.containers[0].unknownNested", '
        'duplicate field "spec.template.spec.containers[0].imagePullPolicy"')


def test_yaml_strict_messages() -> None:
    body = b"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: a\n  name: b\nspec:\n  zzz: 1\n"
    obj, duplicates = decode_body(body, "application/yaml", detect_duplicates=True)
    result = validate_object(obj, CATALOG, "apps", "v1", "Deployment")
    messages = strict_field_messages(obj, duplicates, result.unknown_fields)
    assert messages == ['line 5: key "name" already set in map', 'unknown field "spec.zzz"']
    assert strict_decoding_error(messages) == (
        'strict decoding error: yaml: unmarshal errors:\n  line 5: key "name" already set in map, '
        'unknown field "spec.zzz"')


def test_free_form_fields_are_not_unknown() -> None:
    crd_like: dict[str, Any] = {"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
        "type": "object", "default": {"deep": {"any": 1}}}}}]}}
    result = validate_object(crd_like, CATALOG, "apiextensions.k8s.io", "v1", "CustomResourceDefinition")
    assert result.unknown_fields == []
    crd_like["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-anything"] = 1
    result = validate_object(crd_like, CATALOG, "apiextensions.k8s.io", "v1", "CustomResourceDefinition")
    assert result.unknown_fields == ["spec.versions[0].schema.openAPIV3Schema.x-anything"]


def test_unknown_kind_gives_empty_result() -> None:
    result = validate_object({"spec": {"x": 1}}, CATALOG, "example.com", "v1", "Widget")
    assert (result.errors, result.unknown_fields, result.decode_error) == ([], [], None)


def test_dns_validators() -> None:
    assert validate_dns1123_label("my-name") == []
    assert validate_dns1123_label("My-Name") == [_LABEL_REGEX_MSG]
    assert validate_dns1123_label("a" * 64) == ["must be no more than 63 characters"]
    assert validate_dns1123_subdomain("example.com") == []
    assert validate_dns1123_subdomain("a" * 254)[0] == "must be no more than 253 characters"
    assert validate_dns1123_subdomain("-x")[0].startswith("a lowercase RFC 1123 subdomain must consist")


def test_label_key_and_value() -> None:
    assert validate_label_key("example.com/app") == []
    assert validate_label_key("/app") == ["prefix part must be non-empty"]
    assert validate_label_key("app/") == [
        "name part must be non-empty",
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
        "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
        "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"]
    assert validate_label_key("a" * 64) == ["name part must be no more than 63 characters"]
    assert validate_label_key("Bad_Prefix/app")[0].startswith("prefix part a lowercase RFC 1123 subdomain")
    assert validate_label_value("") == []
    assert validate_label_value("v" * 64) == ["must be no more than 63 characters"]
    assert validate_label_value("-x")[0].startswith("a valid label must be an empty string")


def name_validator_for(group: str, kind: str) -> Any:
    """The name rule of a built-in kind: its strategy's (coreapi.kinds)."""
    info = catalog.find_resource_by_kind(group, "v1", kind)
    assert info is not None
    return strategy_for(info, SchemaCatalog.load()).name_validator


def test_object_meta_name_rules_per_kind() -> None:
    ns = name_validator_for("", "Namespace")
    assert [str(e) for e in validate_object_meta({"name": "a.b"}, False, ns)] == [
        f'metadata.name: Invalid value: "a.b": {_LABEL_REGEX_MSG}']
    configmap = name_validator_for("", "ConfigMap")
    assert validate_object_meta({"name": "a.b", "namespace": "default"}, True, configmap) == []
    role = name_validator_for("rbac.authorization.k8s.io", "ClusterRole")
    assert validate_object_meta({"name": "system:Admin"}, False, role) == []
    assert [str(e) for e in validate_object_meta({"name": "a/b"}, False, role)] == [
        "metadata.name: Invalid value: \"a/b\": may not contain '/'"]
    service = name_validator_for("", "Service")
    assert validate_object_meta({"name": "1abc", "namespace": "d"}, True, service)[0].field == "metadata.name"


def test_object_meta_structure() -> None:
    subdomain = name_validator_for("apps", "Deployment")
    errs = [str(e) for e in validate_object_meta({}, True, subdomain)]
    assert errs == ["metadata.name: Required value: name or generateName is required",
                    "metadata.namespace: Required value"]
    assert validate_object_meta({"generateName": "web-", "namespace": "d"}, True, subdomain) == []
    forbidden = validate_object_meta({"name": "n", "namespace": "d"}, False, subdomain)
    assert [str(e) for e in forbidden] == ["metadata.namespace: Forbidden: not allowed on this type"]
    bad_ns = validate_object_meta({"name": "n", "namespace": "Bad"}, True, subdomain)
    assert bad_ns[0].field == "metadata.namespace"


def test_object_meta_labels_annotations_finalizers() -> None:
    subdomain = name_validator_for("", "ConfigMap")
    meta = {"name": "n", "namespace": "d", "labels": {"ok": "-bad"},
            "annotations": {"Example.com/Key": "fine", "bad key": "x"},
            "finalizers": ["orphan", "foregroundDeletion"]}
    errs = validate_object_meta(meta, True, subdomain)
    assert [e.field for e in errs] == ["metadata.labels", "metadata.annotations", "metadata.finalizers"]
    assert errs[0].value == "-bad" and errs[1].value == "bad key"
    assert errs[2].detail == "finalizer orphan and foregroundDeletion cannot be both set"
    huge = {"name": "n", "namespace": "d", "annotations": {"a": "x" * (256 * 1024)}}
    too_long = validate_object_meta(huge, True, subdomain)
    assert [(e.field, e.reason) for e in too_long] == [("metadata.annotations", "FieldValueTooLong")]
