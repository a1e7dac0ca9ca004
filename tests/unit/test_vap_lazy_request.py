"""The policy plugin builds per request only what its policies need (bench/vap_eval_bench.py):
the request's equivalent resources only when a rule does not name the request's own resource
(once per request however many policies ask), ``request`` / ``namespaceObject`` only for a policy
whose expressions read them, and a policy that reads them still sees kube's values."""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery.policy.compiled import CompiledPolicy
from genericapi.apimachinery.policy.plugin import ValidatingAdmissionPolicyPlugin
from test_vap_engine import Source, attrs, deployment, run


class Resource:
    def __init__(self, group: str, version: str, resource: str) -> None:
        self.group, self.version, self.resource = group, version, resource


class CountingEquivalents:
    """apps/v1 and apps/v1beta1 deployments are one resource; counts the questions."""

    def __init__(self) -> None:
        self.asked = 0

    def equivalents(self, group: str, version: str, resource: str) -> list[tuple[Resource, str]]:
        self.asked += 1
        return [(Resource("apps", v, "deployments"), "Deployment") for v in ("v1", "v1beta1")]

    async def convert(self, obj: dict[str, Any], group: str, version: str, kind: str) -> dict[str, Any]:
        out = dict(obj)
        out["apiVersion"] = f"{group}/{version}"
        return out


def rules(version: str) -> dict[str, Any]:
    return {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": [version], "operations": ["CREATE"],
                               "resources": ["deployments"]}]}


def test_equivalents_asked_only_when_a_rule_names_another_version() -> None:
    src = Source()
    src.add("own", {"matchConstraints": rules("v1"), "validations": [{"expression": "object.spec.replicas <= 5"}]})
    eq = CountingEquivalents()
    plugin = ValidatingAdmissionPolicyPlugin(src, None, eq)
    assert run(plugin, attrs(deployment(2))) is None
    assert run(plugin, attrs(deployment(9))) is not None
    assert eq.asked == 0
    for name in ("other-a", "other-b"):  # two policies through the equivalent version: asked once per request
        src.add(name, {"matchConstraints": rules("v1beta1"), "validations": [
            {"expression": "object.apiVersion == 'apps/v1beta1' && request.kind.version == 'v1beta1'"}]})
    assert run(plugin, attrs(deployment(2))) is None
    assert eq.asked == 1
    src.add("deny", {"matchConstraints": rules("v1beta1"), "validations": [{"expression": "object.apiVersion == 'x'"}]})
    err = run(plugin, attrs(deployment(2)))
    assert err is not None and "'deny'" in err.message
    assert eq.asked == 2


def test_reads_lists_what_the_expressions_read() -> None:
    policy = CompiledPolicy.compile({"metadata": {"name": "p"}, "spec": {
        "validations": [{"expression": "object.data.all(k, object.data[k].size() < 4096)",
                         "messageExpression": "'too large in ' + object.metadata.name"}]}})
    assert policy.reads == {"object"}
    policy = CompiledPolicy.compile({"metadata": {"name": "p"}, "spec": {
        "variables": [{"name": "ns", "expression": "namespaceObject.metadata.name"}],
        "validations": [{"expression": "variables.ns == 'ns'"}, {"expression": "oops(("}],
        "auditAnnotations": [{"key": "op", "valueExpression": "request.operation"}]}})
    assert policy.reads == {"namespaceObject", "variables", "request"}


def test_request_and_namespace_object_still_seen_by_policies_reading_them() -> None:
    src = Source()
    src.add("plain", {"validations": [{"expression": "object.spec.replicas <= 5"}]})
    src.add("reads", {"validations": [
        {"expression": "request.operation == 'CREATE' && request.namespace == 'ns' && "
                       "request.userInfo.username == 'alice'"},
        {"expression": "namespaceObject.metadata.labels.env == 'prod'", "message": "not prod"}]})
    plugin = ValidatingAdmissionPolicyPlugin(src)
    assert run(plugin, attrs(deployment(2))) is None
    src.namespaces["ns"]["metadata"]["labels"] = {"env": "dev"}
    err = run(plugin, attrs(deployment(2)))
    assert err is not None and err.message.endswith("denied request: not prod")
    err = run(plugin, attrs(deployment(9)))  # the plain policy denies first (name order)
    assert err is not None and "'plain'" in err.message
