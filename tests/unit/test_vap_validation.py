"""kube's field errors for bad ValidatingAdmissionPolicies and bindings (admissionregistration/validation)."""

from __future__ import annotations

import copy
from typing import Any

from coreapi.validation.admissionpolicy import validate_binding, validate_policy


def policy(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "failurePolicy": "Fail",
        "matchConstraints": {"matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {},
                             "resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                                                "operations": ["CREATE"], "resources": ["deployments"]}]},
        "validations": [{"expression": "object.spec.replicas <= 5"}]}
    base.update(spec)
    return {"metadata": {"name": "p"}, "spec": base}


def texts(errs: list[Any]) -> list[str]:
    return [str(e) for e in errs]


def test_a_good_policy_has_no_errors() -> None:
    good = policy(paramKind={"apiVersion": "v1", "kind": "ConfigMap"},
                  matchConditions=[{"name": "not-system", "expression": "!request.userInfo.username.startsWith('s')"}],
                  variables=[{"name": "max", "expression": "int(params.data.max)"}],
                  validations=[{"expression": "object.spec.replicas <= variables.max",
                                "messageExpression": "'max ' + string(variables.max)", "reason": "Forbidden"}],
                  auditAnnotations=[{"key": "replicas", "valueExpression": "string(object.spec.replicas)"}])
    assert validate_policy(good) == []


def test_no_validations_nor_audit_annotations() -> None:
    assert texts(validate_policy(policy(validations=[]))) == [
        "spec.validations: Required value: validations or auditAnnotations must contain at least one item",
        "spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item"]


def test_syntax_errors_and_undeclared_names_are_cel_gos() -> None:
    errs = texts(validate_policy(policy(validations=[{"expression": "object.spec.replicas <"},
                                                     {"expression": "params.max > 1"}])))
    assert errs[0].startswith('spec.validations[0].expression: Invalid value: "object.spec.replicas <": '
                              "compilation failed: ERROR: <input>:1:23: Syntax error: mismatched input '<EOF>'")
    assert errs[1] == ('spec.validations[1].expression: Invalid value: "params.max > 1": compilation failed: '
                       "ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n"
                       " | params.max > 1\n | ^")


def test_rules_reasons_actions_and_names() -> None:
    p = policy(failurePolicy="Sometimes", validations=[{"expression": "true", "reason": "Teapot"}],
               variables=[{"name": "in", "expression": "1"}],
               auditAnnotations=[{"key": "a b", "valueExpression": "'x'"}])
    rule = p["spec"]["matchConstraints"]["resourceRules"][0]
    rule.update(operations=["*", "CREATE"], resources=["*", "pods"], scope="Everywhere")
    assert texts(validate_policy(p)) == [
        'spec.failurePolicy: Unsupported value: "Sometimes": supported values: "Fail", "Ignore"',
        'spec.matchConstraints.resourceRules[0].operations: Invalid value: ["*","CREATE"]: '
        "if '*' is present, must not specify other operations",
        'spec.matchConstraints.resourceRules[0].resources: Invalid value: ["*","pods"]: '
        "if '*' is present, must not specify other resources without subresources",
        'spec.matchConstraints.resourceRules[0].scope: Unsupported value: "Everywhere": supported values: '
        '"*", "Cluster", "Namespaced"',
        'spec.variables[0].name: Invalid value: "in": name is not a valid CEL identifier',
        'spec.validations[0].reason: Unsupported value: "Teapot": supported values: "Forbidden", "Invalid", '
        '"RequestEntityTooLarge", "Unauthorized"',
        'spec.auditAnnotations[0].key: Invalid value: "p/a b": name part must consist of alphanumeric '
        "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  "
        "or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"]


def test_missing_resource_rules_and_param_kind() -> None:
    p = policy(paramKind={"apiVersion": "a/b/c", "kind": ""})
    p["spec"]["matchConstraints"]["resourceRules"] = []
    assert texts(validate_policy(p)) == [
        'spec.paramKind.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c',
        "spec.paramKind.kind: Required value",
        "spec.matchConstraints.resourceRules: Required value"]


def binding(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"policyName": "p", "validationActions": ["Deny"]}
    base.update(spec)
    return {"metadata": {"name": "b"}, "spec": base}


def test_binding_errors() -> None:
    assert validate_binding(binding()) == []
    assert texts(validate_binding(binding(policyName="", validationActions=["Deny", "Warn", "Deny", "Log"],
                                          paramRef={"name": "a", "selector": {}}))) == [
        "spec.policyName: Required value",
        "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
        "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
        "spec.paramRef.parameterNotFoundAction: Required value",
        'spec.validationActions[2]: Duplicate value: "Deny"',
        'spec.validationActions[3]: Unsupported value: "Log": supported values: "Audit", "Deny", "Warn"',
        'spec.validationActions: Invalid value: ["Deny","Warn","Deny","Log"]: must not contain both Deny and '
        "Warn (repeating the same validation failure information in the API response and headers serves no "
        "purpose)"]
    assert texts(validate_binding(binding(validationActions=[], paramRef={"parameterNotFoundAction": "Deny"}))) == [
        "spec.paramRef: Required value: one of name or selector must be specified",
        "spec.validationActions: Required value: at least one validation action is required"]


def test_policy_is_not_changed_by_validation() -> None:
    p = policy()
    before = copy.deepcopy(p)
    validate_policy(p)
    assert p == before
