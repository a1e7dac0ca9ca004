"""The ValidatingAdmissionPolicy engine against admission records: matching, variables, messages,
params, parameterNotFoundAction, failurePolicy and each validation action, over real CEL."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from genericapi.apimachinery.admission import CREATE, DELETE, UPDATE, Attributes
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.policy.plugin import FAILURE_ANNOTATION, ValidatingAdmissionPolicyPlugin
from genericapi.apimachinery.user import UserInfo


class Params:
    def __init__(self, objs: list[dict[str, Any]], namespaced: bool = True) -> None:
        self.objs, self.namespaced = objs, namespaced

    async def wait_synced(self, wait_seconds: float) -> bool:
        return True

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return next((o for o in self.list(namespace) if o["metadata"]["name"] == name), None)

    def list(self, namespace: str) -> list[dict[str, Any]]:
        return [o for o in self.objs if not namespace or o["metadata"].get("namespace") == namespace]


class Source:
    """Policies, bindings, namespaces and params in memory (what the watch caches hold)."""

    def __init__(self) -> None:
        self.policies_: list[dict[str, Any]] = []
        self.bindings_: list[dict[str, Any]] = []
        self.namespaces = {"ns": {"metadata": {"name": "ns", "labels": {"env": "prod"}}, "spec": {}, "status": {}},
                           "dev": {"metadata": {"name": "dev", "labels": {"env": "dev"}}}}
        self.params: dict[tuple[str, str], Params] = {}
        self.rev = 0

    def revision(self) -> Any:
        return self.rev

    def policies(self) -> list[dict[str, Any]]:
        return self.policies_

    def bindings(self) -> list[dict[str, Any]]:
        return self.bindings_

    def namespace(self, name: str) -> dict[str, Any] | None:
        return self.namespaces.get(name)

    def param_store(self, api_version: str, kind: str) -> Params | None:
        return self.params.get((api_version, kind))

    def add(self, name: str, spec: dict[str, Any], binding: dict[str, Any] | None = None, gen: int = 1) -> None:
        spec.setdefault("matchConstraints", {"resourceRules": [
            {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
             "resources": ["deployments"]}]})
        self.policies_.append({"metadata": {"name": name, "uid": name, "generation": gen}, "spec": spec})
        b = {"policyName": name, "validationActions": ["Deny"]}
        b.update(binding or {})
        self.bindings_.append({"metadata": {"name": f"{name}-binding"}, "spec": b})
        self.rev += 1


def deployment(replicas: int = 3, ns: str = "ns", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": ns, "labels": labels or {"app": "web"}},
            "spec": {"replicas": replicas}}


def attrs(obj: dict[str, Any] | None = None, op: str = CREATE, old: dict[str, Any] | None = None,
          ns: str = "ns") -> Attributes:
    obj = obj if obj is not None or op == DELETE else deployment(ns=ns)
    return Attributes(op, "apps", "v1", "Deployment", "deployments", "", ns, "web", obj, old,
                      UserInfo("alice", ("system:authenticated",)))


def run(plugin: ValidatingAdmissionPolicyPlugin, a: Attributes) -> APIError | None:
    try:
        asyncio.run(plugin.validate(a))
    except APIError as e:
        return e
    return None


MAX5 = {"validations": [{"expression": "object.spec.replicas <= 5"}]}


def test_denial_is_kubes_422_with_failed_expression_message() -> None:
    src = Source()
    src.add("max", dict(MAX5))
    err = run(ValidatingAdmissionPolicyPlugin(src), attrs(deployment(10)))
    assert err is not None and err.code == 422 and err.reason == "Invalid"
    text = ("ValidatingAdmissionPolicy 'max' with binding 'max-binding' denied request: "
            "failed expression: object.spec.replicas <= 5")
    assert err.message == f'deployments.apps "web" is forbidden: {text}'
    assert err.details == {"name": "web", "group": "apps", "kind": "deployments", "causes": [{"message": text}]}
    assert run(ValidatingAdmissionPolicyPlugin(src), attrs(deployment(2))) is None


def test_reason_maps_to_kubes_code_and_message_and_message_expression() -> None:
    src = Source()
    src.add("p", {"validations": [
        {"expression": "object.spec.replicas <= 5", "reason": "Forbidden", "message": "  too many  ",
         "messageExpression": "'replicas ' + string(object.spec.replicas) + ' > 5'"}]})
    err = run(ValidatingAdmissionPolicyPlugin(src), attrs(deployment(9)))
    assert err is not None and (err.code, err.reason) == (403, "Forbidden")
    assert err.message.endswith("denied request: replicas 9 > 5")
    src.policies_[0]["spec"]["validations"][0].update(
        {"messageExpression": "object.spec.missing", "reason": "RequestEntityTooLarge"})
    src.policies_[0]["metadata"]["generation"] = 2
    src.rev += 1
    err = run(ValidatingAdmissionPolicyPlugin(src), attrs(deployment(9)))
    assert err is not None and (err.code, err.reason) == (413, "RequestEntityTooLarge")
    assert err.message.endswith("denied request: too many")  # a failing messageExpression falls back


def test_match_constraints_rules_namespace_and_object_selectors() -> None:
    src = Source()
    src.add("p", {"matchConstraints": {
        "resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["*"], "operations": ["CREATE"],
                           "resources": ["deployments"], "scope": "Namespaced"}],
        "namespaceSelector": {"matchLabels": {"env": "prod"}},
        "objectSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}},
        **MAX5})
    plugin = ValidatingAdmissionPolicyPlugin(src)
    assert run(plugin, attrs(deployment(10))) is not None
    assert run(plugin, attrs(deployment(10, ns="dev"), ns="dev")) is None  # namespace labels differ
    assert run(plugin, attrs(deployment(10, labels={"app": "db"}))) is None  # object labels differ
    assert run(plugin, attrs(deployment(10), op=UPDATE, old=deployment(1))) is None  # UPDATE not listed


def test_exclude_rules_and_binding_match_resources_narrow() -> None:
    src = Source()
    src.add("p", {"matchConstraints": {
        "resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}],
        "excludeResourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["*"],
                                  "resources": ["deployments"], "resourceNames": ["web"]}]}, **MAX5})
    assert run(ValidatingAdmissionPolicyPlugin(src), attrs(deployment(10))) is None
    src2 = Source()
    src2.add("p", dict(MAX5), {"matchResources": {"namespaceSelector": {"matchLabels": {"env": "dev"}}}})
    plugin = ValidatingAdmissionPolicyPlugin(src2)
    assert run(plugin, attrs(deployment(10))) is None
    assert run(plugin, attrs(deployment(10, ns="dev"), ns="dev")) is not None


def test_match_conditions_and_lazy_variables() -> None:
    src = Source()
    src.add("p", {
        "matchConditions": [{"name": "not-alice", "expression": "request.userInfo.username != 'bob'"}],
        "variables": [{"name": "replicas", "expression": "object.spec.replicas"},
                      {"name": "limit", "expression": "has(object.metadata.labels.big) ? 50 : 5"},
                      {"name": "broken", "expression": "object.spec.nothing"}],
        "validations": [{"expression": "variables.replicas <= variables.limit",
                         "messageExpression": "'at most ' + string(variables.limit)"}]})
    plugin = ValidatingAdmissionPolicyPlugin(src)
    err = run(plugin, attrs(deployment(10)))
    assert err is not None and err.message.endswith("denied request: at most 5")
    assert run(plugin, attrs(deployment(10, labels={"big": "y"}))) is None  # 'broken' is never read


def test_failure_policy_on_runtime_errors() -> None:
    src = Source()
    src.add("p", {"validations": [{"expression": "object.spec.template.spec.hostNetwork == false"}]})
    err = run(ValidatingAdmissionPolicyPlugin(src), attrs(deployment(1)))
    assert err is not None and err.code == 422
    assert err.message.endswith("denied request: expression 'object.spec.template.spec.hostNetwork == false' "
                                "resulted in error: no such key: template")
    src.policies_[0]["spec"]["failurePolicy"] = "Ignore"
    src.policies_[0]["metadata"]["generation"] = 2
    src.rev += 1
    assert run(ValidatingAdmissionPolicyPlugin(src), attrs(deployment(1))) is None


def test_warn_and_audit_actions_do_not_deny() -> None:
    src = Source()
    src.add("p", {**MAX5, "auditAnnotations": [
        {"key": "replicas", "valueExpression": "string(object.spec.replicas)"},
        {"key": "skip", "valueExpression": "null"}]}, {"validationActions": ["Warn", "Audit"]})
    a = attrs(deployment(10))
    assert run(ValidatingAdmissionPolicyPlugin(src), a) is None
    assert a.warnings == ["Validation failed for ValidatingAdmissionPolicy 'p' with binding 'p-binding': "
                          "failed expression: object.spec.replicas <= 5"]
    assert orjson.loads(a.annotations[FAILURE_ANNOTATION]) == [
        {"message": "failed expression: object.spec.replicas <= 5", "policy": "p", "binding": "p-binding",
         "expressionIndex": 0, "validationActions": ["Warn", "Audit"]}]
    assert a.annotations["p/replicas"] == "10" and "p/skip" not in a.annotations


def config(name: str, data: dict[str, str], ns: str = "ns", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": labels or {}}, "data": data}


def params_policy(src: Source, ref: dict[str, Any]) -> None:
    src.add("p", {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}, "validations": [
        {"expression": "object.spec.replicas <= int(params.data.max)",
         "messageExpression": "'max is ' + params.data.max + ' (' + params.metadata.name + ')'"}]},
        {"paramRef": ref})


def test_params_by_name_and_by_selector() -> None:
    src = Source()
    src.params[("v1", "ConfigMap")] = Params([config("limits", {"max": "4"}),
                                              config("a", {"max": "8"}, labels={"vap": "y"}),
                                              config("b", {"max": "2"}, labels={"vap": "y"})])
    params_policy(src, {"name": "limits", "parameterNotFoundAction": "Deny"})
    plugin = ValidatingAdmissionPolicyPlugin(src)
    err = run(plugin, attrs(deployment(5)))
    assert err is not None and err.message.endswith("denied request: max is 4 (limits)")
    assert run(plugin, attrs(deployment(4))) is None
    src2 = Source()
    src2.params = src.params
    params_policy(src2, {"selector": {"matchLabels": {"vap": "y"}}, "parameterNotFoundAction": "Allow"})
    err = run(ValidatingAdmissionPolicyPlugin(src2), attrs(deployment(3)))  # every selected param is evaluated
    assert err is not None and err.message.endswith("denied request: max is 2 (b)")


def test_parameter_not_found_action() -> None:
    src = Source()
    src.params[("v1", "ConfigMap")] = Params([])
    params_policy(src, {"name": "absent", "parameterNotFoundAction": "Deny"})
    err = run(ValidatingAdmissionPolicyPlugin(src), attrs(deployment(1)))
    assert err is not None and err.message == (
        'deployments.apps "web" is forbidden: ValidatingAdmissionPolicy \'p\' with binding \'p-binding\' denied '
        "request: failed to configure binding: no params found for policy binding with `Deny` "
        "parameterNotFoundAction")
    src2 = Source()
    src2.params = src.params
    params_policy(src2, {"name": "absent", "parameterNotFoundAction": "Allow"})
    assert run(ValidatingAdmissionPolicyPlugin(src2), attrs(deployment(100))) is None


def test_unknown_param_kind_is_a_policy_configuration_error() -> None:
    src = Source()
    src.add("p", {"paramKind": {"apiVersion": "example.com/v1", "kind": "Nope"}, **MAX5}, {"paramRef": {"name": "x"}})
    err = run(ValidatingAdmissionPolicyPlugin(src), attrs(deployment(1)))
    assert err is not None and err.message.endswith(
        "ValidatingAdmissionPolicy 'p' denied request: failed to configure policy: failed to find resource "
        "referenced by paramKind: 'example.com/v1, Kind=Nope'")


def test_namespaced_param_for_cluster_scoped_request() -> None:
    src = Source()
    src.params[("v1", "ConfigMap")] = Params([config("limits", {"max": "4"})])
    src.add("p", {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                  "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                          "operations": ["CREATE"], "resources": ["namespaces"]}]},
                  "validations": [{"expression": "true"}]}, {"paramRef": {"name": "limits"}})
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}
    a = Attributes(CREATE, "", "v1", "Namespace", "namespaces", "", "", "x", ns, None, UserInfo("u"))
    err = run(ValidatingAdmissionPolicyPlugin(src), a)
    assert err is not None and err.message == (
        'namespaces "x" is forbidden: ValidatingAdmissionPolicy \'p\' with binding \'p-binding\' denied request: '
        "failed to configure binding: cannot use namespaced paramRef in policy binding that matches "
        "cluster-scoped resources")


def test_namespace_object_old_object_and_delete() -> None:
    src = Source()
    src.add("p", {"matchConstraints": {"resourceRules": [
        {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["DELETE", "UPDATE"],
         "resources": ["deployments"]}]},
        "validations": [{"expression": "namespaceObject.metadata.labels.env != 'prod' || "
                                       "oldObject.spec.replicas < 3", "message": "prod keeps big deployments"}]})
    plugin = ValidatingAdmissionPolicyPlugin(src)
    err = run(plugin, attrs(None, op=DELETE, old=deployment(5)))
    assert err is not None and err.message.endswith("denied request: prod keeps big deployments")
    assert run(plugin, attrs(None, op=DELETE, old=deployment(2))) is None
    assert run(plugin, attrs(deployment(9), op=UPDATE, old=deployment(1))) is None


def test_compiled_once_per_generation() -> None:
    src = Source()
    src.add("p", dict(MAX5))
    plugin = ValidatingAdmissionPolicyPlugin(src)
    run(plugin, attrs(deployment(1)))
    first = plugin._compiled["p"]
    src.rev += 1
    run(plugin, attrs(deployment(1)))
    assert plugin._compiled["p"] is first
    src.policies_[0]["metadata"]["generation"] = 2
    src.rev += 1
    run(plugin, attrs(deployment(1)))
    assert plugin._compiled["p"] is not first


def test_syntax_error_denies_with_compilation_error() -> None:
    src = Source()
    src.add("p", {"validations": [{"expression": "object.spec.replicas <="}]})
    err = run(ValidatingAdmissionPolicyPlugin(src), attrs(deployment(1)))
    assert err is not None and "denied request: compilation error: ERROR: <input>:1:" in err.message


@pytest.mark.parametrize("op", [CREATE])
def test_policy_without_binding_does_nothing(op: str) -> None:
    src = Source()
    src.add("p", {"validations": [{"expression": "false"}]})
    src.bindings_.clear()
    assert run(ValidatingAdmissionPolicyPlugin(src), attrs(deployment(1), op=op)) is None
