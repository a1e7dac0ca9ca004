"""The schema walk's memos (per schema node, per required list, per time string) answer as the
walk without them: the same decode errors, canonical rewrites, required errors and unknown fields
the first time and every later time, for good and bad inputs alike (issue 15, validation CPU)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from genericapi.apimachinery import gowire
from genericapi.apimachinery import validation as v
from genericapi.apimachinery.schemas import SchemaCatalog


@pytest.fixture(scope="module")
def catalog() -> SchemaCatalog:
    return SchemaCatalog.load("1.33")


def check(obj: dict[str, Any], catalog: SchemaCatalog, group: str, kind: str) -> tuple[Any, ...]:
    copied = copy.deepcopy(obj)
    result = v.validate_object(copied, catalog, group, "v1", kind)
    result.apply_canonical()
    return [repr(e) for e in result.errors], result.unknown_fields, result.decode_error, copied


def pod(**meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **meta},
            "spec": {"containers": [{"name": "a", "image": "i"}]}}


@pytest.mark.parametrize("value, micro", [
    ("2026-11-28T05:00:00Z", False), ("2024-01-01T10:00:00.5+02:00", False), ("2026-02-30T00:00:00Z", False),
    ("2026-13-01T00:00:00Z", False), ("nonsense", False), ("2026-01-01T00:00:00.123456Z", True),
    ("2026-01-01T00:00:00Z", True), ("2026-01-01T00:00:00.1234567Z", True)])
def test_time_memo_answers_as_gowire_every_time(value: str, micro: bool) -> None:
    try:
        expected: tuple[str, str | None] = (gowire.canonical_time(value, micro), None)
    except ValueError as err:
        expected = (value, str(err))
    assert v._canonical_time(value, micro) == expected
    assert v._canonical_time(value, micro) == expected  # the remembered answer


def test_a_string_valid_as_time_is_not_remembered_as_valid_micro_time() -> None:
    assert v._canonical_time("2026-01-01T00:00:00Z", False) == ("2026-01-01T00:00:00Z", None)
    _, error = v._canonical_time("2026-01-01T00:00:00Z", True)
    assert error is not None and "cannot parse" in error


def test_time_memo_is_bounded() -> None:
    for second in range(v._TIMES_MAX + 10):
        v._canonical_time(f"2026-01-01T{second // 3600 % 24:02d}:{second // 60 % 60:02d}:{second % 60:02d}Z",
                          False)
    assert len(v._TIMES) <= v._TIMES_MAX


@pytest.mark.parametrize("meta, decode_error", [
    ({"creationTimestamp": "2026-02-30T00:00:00Z"}, 'parsing time "2026-02-30T00:00:00Z": day out of range'),
    ({"creationTimestamp": 5}, "json: cannot unmarshal number into Go value of type string"),
    ({"creationTimestamp": "2026-11-28T05:00:00Z"}, None),
    ({"labels": "x"}, "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels of type "
                      "map[string]string"),
])
def test_repeated_walks_answer_alike(catalog: SchemaCatalog, meta: dict[str, Any], decode_error: str | None) -> None:
    first = check(pod(**meta), catalog, "", "Pod")
    assert first[2] == decode_error
    for _ in range(3):
        assert check(pod(**meta), catalog, "", "Pod") == first


def test_canonical_time_rewrite_is_applied_on_every_walk(catalog: SchemaCatalog) -> None:
    for _ in range(2):
        *_, out = check(pod(creationTimestamp="2024-01-01T10:00:00.5+02:00"), catalog, "", "Pod")
        assert out["metadata"]["creationTimestamp"] == "2024-01-01T08:00:00Z"


def test_required_fields_after_the_memo(catalog: SchemaCatalog) -> None:
    bad = pod()
    bad["spec"]["containers"] = [{"image": "i", "zz": 1}]
    # A required timestamp missing is never reported (Go writes zero times as null).
    condition = {"type": "Ready", "status": "True", "lastTransitionTime": None}
    bad["status"] = {"conditions": [condition]}
    for _ in range(2):
        errors, unknown, decode_error, _ = check(bad, catalog, "", "Pod")
        assert decode_error is None
        assert unknown == ["spec.containers[0].zz"]
        assert any("spec.containers[0].name" in e and "Required" in e for e in errors), errors
        assert not any("lastTransitionTime" in e for e in errors), errors


def test_plans_are_per_catalog(catalog: SchemaCatalog) -> None:
    other = SchemaCatalog.load("1.33")
    first = check(pod(labels={"a": 1}), catalog, "", "Pod")
    assert first == check(pod(labels={"a": 1}), other, "", "Pod")
    if other is not catalog:
        assert v._plans_of(other) is not v._plans_of(catalog)
