"""CRD name reservation and custom resource printer columns (pure functions of extensions-api)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from extensionsapi import conditions, naming
from extensionsapi.cr_tables import JSONPathError, find_first, parse_path, printer_for


def crd(name: str, group: str, kind: str, plural: str, short: list[str] | None = None,
        accepted: dict[str, Any] | None = None) -> dict[str, Any]:
    names: dict[str, Any] = {"plural": plural, "singular": plural[:-1], "kind": kind, "listKind": kind + "List"}
    if short:
        names["shortNames"] = short
    return {"metadata": {"name": name}, "spec": {"group": group, "names": names},
            "status": {"acceptedNames": accepted or {"plural": "", "kind": ""}}}


def test_fresh_names_are_accepted_and_established_installs() -> None:
    new = crd("foos.g", "g", "Foo", "foos", ["fo"])
    result = naming.compute_names(new, [new])
    assert result.accepted == new["spec"]["names"]
    assert result.names_accepted == naming.Condition("NamesAccepted", "True", "NoConflicts", "no conflicts found")
    assert result.established == naming.Condition("Established", "False", "Installing",
                                                  "the initial names have been accepted")


@pytest.mark.parametrize(("kind", "plural", "short", "reason", "message"), [
    ("Bar", "foos", None, "SingularConflict", '"foo" is already in use'),  # the last conflict is reported
    ("Foo", "bars", None, "ListKindConflict", '"FooList" is already in use'),
    ("Bar", "bars", ["fo"], "ShortNamesConflict", '"fo" is already in use'),
    ("Bar", "bars", ["foo"], "ShortNamesConflict", '"foo" is already in use'),  # the other's singular
    ("FooList", "bars", None, "KindConflict", '"FooList" is already in use'),
])
def test_conflicts_with_accepted_names_of_the_group(kind: str, plural: str, short: list[str] | None,
                                                    reason: str, message: str) -> None:
    owner = crd("foos.g", "g", "Foo", "foos", ["fo"])
    owner["status"]["acceptedNames"] = dict(owner["spec"]["names"])
    new = crd(f"{plural}x.g", "g", kind, plural, short)
    result = naming.compute_names(new, [owner, new])
    assert (result.names_accepted.status, result.names_accepted.reason) == ("False", reason)
    assert result.names_accepted.message == message
    assert result.established.reason == "NotAccepted"
    # Another group may use the same names.
    other = crd(f"{plural}.h", "h", kind, plural, short)
    assert naming.compute_names(other, [owner, other]).names_accepted.status == "True"


def test_names_already_accepted_stay_and_established_is_kept() -> None:
    mine = crd("foos.g", "g", "Foo", "foos")
    mine["status"]["acceptedNames"] = dict(mine["spec"]["names"])
    conditions.set_condition(mine, "Established", "True", "InitialNamesAccepted",
                             "the initial names have been accepted")
    mine["spec"]["names"]["shortNames"] = ["f"]
    result = naming.compute_names(mine, [mine])
    assert result.accepted["shortNames"] == ["f"] and result.established.status == "True"


def test_condition_transition_time_moves_only_on_status_change() -> None:
    obj: dict[str, Any] = {}
    conditions.set_condition(obj, "Established", "False", "Installing", "x")
    obj["status"]["conditions"][0]["lastTransitionTime"] = "2000-01-01T00:00:00Z"
    conditions.set_condition(obj, "Established", "False", "Other", "y")
    assert obj["status"]["conditions"][0]["lastTransitionTime"] == "2000-01-01T00:00:00Z"
    conditions.set_condition(obj, "Established", "True", "Done", "z")
    assert obj["status"]["conditions"][0]["lastTransitionTime"] != "2000-01-01T00:00:00Z"
    assert conditions.equivalent(obj, "Established", "True", "Done", "z")


OBJ = {"metadata": {"name": "a", "creationTimestamp": "2024-01-01T00:00:00Z", "annotations": {"x.io/y": "v"}},
       "spec": {"replicas": 3, "ratio": 1.5, "on": True, "tags": ["p", "q"], "map": {"k": 1}},
       "status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]}}


@pytest.mark.parametrize(("path", "expected"), [
    (".spec.replicas", 3),
    ("{.spec.tags[1]}", "q"),
    (".spec.tags[*]", "p"),
    (".status.conditions[?(@.type==\"Ready\")].status", "True"),
    (".status.conditions[?(@.type=='Synced')].status", "False"),
    (".metadata.annotations.x\\.io/y", "v"),
    (".metadata.annotations['x.io/y']", "v"),
])
def test_jsonpath_subset(path: str, expected: Any) -> None:
    assert find_first(OBJ, parse_path(path)) == expected


def test_jsonpath_rejects_what_it_cannot_read() -> None:
    with pytest.raises(JSONPathError):
        parse_path(".spec[?(@.a > 1)]")


def test_printer_cells_by_type() -> None:
    printer = printer_for([
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio"},
        {"name": "On", "type": "boolean", "jsonPath": ".spec.on"},
        {"name": "Map", "type": "string", "jsonPath": ".spec.map", "priority": 1, "description": "d"},
        {"name": "Missing", "type": "string", "jsonPath": ".spec.nothing"},
        {"name": "Wrong", "type": "integer", "jsonPath": ".spec.tags[0]"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ])
    cols = [(c["name"], c["type"], c["priority"]) for c in printer.columns]
    assert cols[0] == ("Name", "string", 0) and cols[4] == ("Map", "string", 1)
    assert printer.columns[4]["description"] == "d"
    assert printer.columns[1]["description"] == \
        "Custom resource definition column (in JSONPath format): .spec.replicas"
    row = printer.cells(OBJ, datetime(2024, 1, 3, tzinfo=UTC))
    assert not isinstance(row, list)
    assert row.cells == ["a", 3, 1.5, True, '{"k":1}', None, None, "2d"]


def test_default_columns_are_name_and_age() -> None:
    printer = printer_for(None)
    assert [c["name"] for c in printer.columns] == ["Name", "Age"]
