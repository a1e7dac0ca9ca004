"""status.typeChecking warnings for policies whose expressions read fields their kinds do not have."""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery.policy import typecheck
from genericapi.apimachinery.schemas import SchemaCatalog

CATALOG = SchemaCatalog.load()
KINDS = {("apps", "v1", "deployments"): "Deployment", ("", "v1", "configmaps"): "ConfigMap"}


def lookup(group: str, version: str, resource: str) -> tuple[str, dict[str, Any]] | None:
    kind = KINDS.get((group, version, resource))
    root = CATALOG.root_schema(group, version, kind) if kind else None
    return (kind, typecheck.inline(CATALOG, root)) if kind and root else None


def policy(*validations: dict[str, str], groups: list[str] | None = None, resources: list[str] | None = None,
           versions: list[str] | None = None) -> dict[str, Any]:
    return {"spec": {"matchConstraints": {"resourceRules": [
        {"apiGroups": groups or ["apps"], "apiVersions": versions or ["v1"], "operations": ["CREATE"],
         "resources": resources or ["deployments"]}]}, "validations": list(validations)}}


def test_undefined_field_on_the_matched_kind() -> None:
    warnings = typecheck.check(policy({"expression": "object.replicas > 1"},
                                      {"expression": "object.spec.replicas > 1",
                                       "messageExpression": "'n=' + string(object.spec.replica)"}), lookup)
    assert [w.to_dict() for w in warnings] == [
        {"fieldRef": "spec.validations[0].expression",
         "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'replicas'\n"
                    " | object.replicas > 1\n | ......^"},
        {"fieldRef": "spec.validations[1].messageExpression",
         "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:26: undefined field 'replica'\n"
                    " | 'n=' + string(object.spec.replica)\n | .........................^"}]


def test_each_kind_is_checked_and_wildcards_are_skipped() -> None:
    both = policy({"expression": "object.data.size() > 0"}, groups=["", "apps"],
                  resources=["configmaps", "deployments"])
    warnings = typecheck.check(both, lookup)
    assert len(warnings) == 1 and warnings[0].warning.startswith(
        "apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'data'")
    assert typecheck.check(policy({"expression": "object.nope"}, groups=["*"]), lookup) == []
    assert typecheck.check(policy({"expression": "object.nope"}, resources=["deployments/status"]), lookup) == []


def test_good_policy_has_no_warnings() -> None:
    p = policy({"expression": "object.spec.template.spec.containers.all(c, c.image != '')",
                "messageExpression": "object.metadata.name + ' ' + string(oldObject.spec.replicas)"})
    assert typecheck.check(p, lookup) == []
