"""Field paths, sets and their fieldsV1 form (structured-merge-diff's fieldpath package)."""

from __future__ import annotations

import orjson
import pytest
from genericapi.apimachinery.fieldmanager import pathelement as pe
from genericapi.apimachinery.fieldmanager.fieldset import FieldSet, FieldSetError


def test_path_elements_spell_as_kube() -> None:
    assert pe.field("spec") == "f:spec"
    assert pe.key({"protocol": "TCP", "containerPort": 80}) == 'k:{"containerPort":80,"protocol":"TCP"}'
    assert pe.value("a") == 'v:"a"'
    assert pe.index(3) == "i:3"
    assert pe.key({"name": "<a&b>"}) == 'k:{"name":"\\u003ca\\u0026b\\u003e"}'


def test_display_as_conflict_paths() -> None:
    path = ("f:spec", "f:template", "f:spec", "f:containers", pe.key({"name": "nginx"}), "f:image")
    assert pe.display_path(path) == '.spec.template.spec.containers[name="nginx"].image'
    assert pe.display(pe.key({"containerPort": 80, "protocol": "TCP"})) == '[containerPort=80,protocol="TCP"]'
    assert pe.display(pe.value("x")) == '[="x"]'
    assert pe.display("i:2") == "[2]"


def test_order_fields_keys_values_indexes() -> None:
    items = ["i:0", 'v:"b"', 'k:{"name":"b"}', "f:z", 'k:{"name":"a"}', "f:a", "v:1", 'v:"a"']
    assert sorted(items, key=pe.sort_key) == ["f:a", "f:z", 'k:{"name":"a"}', 'k:{"name":"b"}', "v:1",
                                              'v:"a"', 'v:"b"', "i:0"]


def test_fieldsv1_round_trip_with_dot_entries() -> None:
    doc = {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
           "f:spec": {"f:containers": {'k:{"name":"a"}': {".": {}, "f:image": {}, "f:name": {}}},
                      "f:replicas": {}}}
    fs = FieldSet.from_json(doc)
    assert fs.has(("f:spec", "f:replicas"))
    assert fs.has(("f:metadata", "f:labels"))
    assert not fs.has(("f:metadata",))
    assert fs.to_json() == doc
    assert orjson.dumps(fs.to_json()) == orjson.dumps(doc)


def test_keys_are_normalised_and_sorted_when_decoded() -> None:
    fs = FieldSet.from_json({'k:{"protocol": "TCP", "port": 80}': {}, "f:b": {}, "f:a": {}})
    assert list(fs.to_json()) == ["f:a", "f:b", 'k:{"port":80,"protocol":"TCP"}']


@pytest.mark.parametrize("doc", [[], {"f:a": []}, {"x": {}}, {'k:{"a"': {}}, {"i:x": {}}])
def test_bad_fieldsv1_is_rejected(doc: object) -> None:
    with pytest.raises(FieldSetError):
        FieldSet.from_json(doc)


def test_union_difference_intersection() -> None:
    a = FieldSet.of(("f:a",), ("f:b", "f:c"), ("f:b", "f:d"))
    b = FieldSet.of(("f:b", "f:c"), ("f:e",))
    assert a.union(b).to_json() == {"f:a": {}, "f:b": {"f:c": {}, "f:d": {}}, "f:e": {}}
    assert a.difference(b).to_json() == {"f:a": {}, "f:b": {"f:d": {}}}
    assert a.intersection(b).to_json() == {"f:b": {"f:c": {}}}
    assert FieldSet.of(("f:x",)).intersection(FieldSet.of(("f:x", "f:y"))).empty()


def test_recursive_difference_drops_whole_subtrees() -> None:
    a = FieldSet.of(("f:spec", "f:a"), ("f:spec", "f:b", "f:c"), ("f:status", "f:x"))
    assert a.recursive_difference(FieldSet.of(("f:spec", "f:b"), ("f:status",))).to_json() == {
        "f:spec": {"f:a": {}}}


def test_paths_iterate_in_kube_order() -> None:
    fs = FieldSet.from_json({"f:b": {".": {}, "f:c": {}}, "f:a": {"f:x": {}}, "f:z": {}})
    # Set.Iterate: this level's members first, then each child's paths.
    assert list(fs.paths()) == [("f:b",), ("f:z",), ("f:a", "f:x"), ("f:b", "f:c")]
