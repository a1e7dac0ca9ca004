"""The empty Go objects that creates are compared against (fieldmanager.gozero), from the
1.33 schemas and Kubernetes' protobuf descriptors."""

from __future__ import annotations

import pytest
from genericapi.apimachinery.fieldmanager import gozero
from genericapi.apimachinery.fieldmanager.gozero import GoField
from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.registry.fieldtracking import go_types


def zero(group: str, version: str, kind: str) -> object:
    go = go_types()
    if go is None:
        pytest.skip("no protobuf descriptor set in this installation")
    catalog = SchemaCatalog.load("1.33")
    name = catalog.definition_name(group, version, kind)
    assert name is not None
    return gozero.zero_object(catalog.definitions, name, go)


def test_deployment_has_its_value_structs_and_fields_without_omitempty() -> None:
    assert zero("apps", "v1", "Deployment") == {
        "metadata": {"creationTimestamp": None},
        "spec": {"selector": None, "strategy": {},
                 "template": {"metadata": {"creationTimestamp": None}, "spec": {"containers": None}}},
        "status": {}}


def test_scalars_without_omitempty_are_zero_and_custom_marshalers_write_themselves() -> None:
    assert zero("autoscaling", "v2", "HorizontalPodAutoscaler") == {
        "metadata": {"creationTimestamp": None},
        "spec": {"maxReplicas": 0, "scaleTargetRef": {"kind": "", "name": ""}},
        "status": {"desiredReplicas": 0}}
    event = zero("", "v1", "Event")
    assert event == {"metadata": {"creationTimestamp": None}, "involvedObject": {}, "source": {},
                     "firstTimestamp": None, "lastTimestamp": None, "eventTime": None}


def test_kinds_with_only_pointers_maps_and_omitempty_fields() -> None:
    assert zero("", "v1", "ConfigMap") == {"metadata": {"creationTimestamp": None}}
    assert zero("", "v1", "Service") == {"metadata": {"creationTimestamp": None}, "spec": {},
                                         "status": {"loadBalancer": {}}}


def test_hand_made_types() -> None:
    definitions = {
        "io.k8s.x.v1.Thing": {"required": ["count", "items"], "properties": {
            "count": {"type": "integer"}, "items": {"type": "array", "items": {"type": "string"}},
            "ptr": {"$ref": "#/$defs/io.k8s.x.v1.Part"}, "part": {"$ref": "#/$defs/io.k8s.x.v1.Part"},
            "when": {"$ref": "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.Time"},
            "size": {"$ref": "#/$defs/io.k8s.apimachinery.pkg.api.resource.Quantity"}}},
        "io.k8s.x.v1.Part": {"properties": {"name": {"type": "string"}}},
    }
    go = {"k8s.io.x.v1.Thing": {"count": GoField(True), "items": GoField(True),
                                "ptr": GoField(False, "k8s.io.x.v1.Part"),
                                "part": GoField(True, "k8s.io.x.v1.Part"),
                                "when": GoField(True, "k8s.io.apimachinery.pkg.apis.meta.v1.Time"),
                                "size": GoField(True, "k8s.io.apimachinery.pkg.api.resource.Quantity")},
          "k8s.io.x.v1.Part": {"name": GoField(True)}}
    assert gozero.zero_object(definitions, "io.k8s.x.v1.Thing", go) == {
        "count": 0, "items": None, "part": {}, "when": None, "size": "0"}
    assert gozero.zero_object(definitions, "io.k8s.x.v1.Unknown", go) is None
