"""matchConditions (kube's matchconditions.Matcher) and the admission CEL variables, over real CEL."""

from __future__ import annotations

import asyncio

from genericapi.apimachinery.admission import CREATE, UPDATE, Attributes
from genericapi.apimachinery.authorization import Attributes as AuthzAttributes
from genericapi.apimachinery.authorization import Decision, Rules
from genericapi.apimachinery.cel.admission import Activation, admission_request, compile_expression
from genericapi.apimachinery.matchconditions import IGNORE, MatchConditions
from genericapi.apimachinery.user import UserInfo


def attrs(op: str = CREATE, obj: dict | None = None, old: dict | None = None) -> Attributes:
    obj = obj if obj is not None else {"apiVersion": "v1", "kind": "ConfigMap",
                                       "metadata": {"name": "c", "namespace": "ns", "labels": {"a": "b"}},
                                       "data": {"k": "v"}}
    return Attributes(op, "", "v1", "ConfigMap", "configmaps", "", "ns", "c", obj, old,
                      UserInfo("alice", ("devs", "system:authenticated")))


def activation(a: Attributes, **kw) -> Activation:
    return Activation(a, admission_request(a), **kw)


def test_all_true_matches() -> None:
    mc = MatchConditions([{"name": "a", "expression": "object.metadata.name == 'c'"},
                          {"name": "b", "expression": "request.userInfo.username == 'alice'"}])
    assert mc.match(activation(attrs())).matches


def test_first_false_is_named_even_after_an_error() -> None:
    mc = MatchConditions([{"name": "err", "expression": "object.spec.x == 1"},
                          {"name": "no", "expression": "'devs' in request.userInfo.groups && false"}])
    res = mc.match(activation(attrs()))
    assert not res.matches and res.failed_condition == "no" and not res.error


def test_error_with_fail_policy_reports_kubes_text() -> None:
    mc = MatchConditions([{"name": "err", "expression": "object.spec.x == 1"}])
    res = mc.match(activation(attrs()))
    assert not res.matches
    assert res.error == "expression 'object.spec.x == 1' resulted in error: no such key: spec"


def test_error_with_ignore_policy_does_not_match() -> None:
    mc = MatchConditions([{"name": "err", "expression": "object.spec.x == 1"}], IGNORE)
    res = mc.match(activation(attrs()))
    assert not res.matches and not res.error


def test_two_errors_aggregate_in_brackets() -> None:
    mc = MatchConditions([{"name": "a", "expression": "object.spec.x == 1"},
                          {"name": "b", "expression": "object.status.y == 1"}])
    res = mc.match(activation(attrs()))
    assert res.error.startswith("[expression 'object.spec.x == 1' resulted in error: no such key: spec, ")


def test_old_object_is_null_on_create_and_set_on_update() -> None:
    mc = MatchConditions([{"name": "a", "expression": "oldObject == null"}])
    assert mc.match(activation(attrs())).matches
    old = {"metadata": {"name": "c"}, "data": {"k": "old"}}
    a = attrs(UPDATE, old=old)
    assert not mc.match(activation(a)).matches
    changed = MatchConditions([{"name": "a", "expression": "object.data.k != oldObject.data.k"}])
    assert changed.match(activation(a)).matches


def test_request_variable_has_kubes_fields() -> None:
    req = admission_request(attrs())
    assert req["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert req["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert req["operation"] == "CREATE" and req["namespace"] == "ns" and req["name"] == "c"
    assert req["userInfo"] == {"username": "alice", "groups": ["devs", "system:authenticated"]}
    assert "subResource" not in req


class OnlyGet:
    async def authorize(self, a: AuthzAttributes) -> tuple[Decision, str]:
        if a.verb == "get" and a.resource == "secrets":
            return Decision.ALLOW, "allowed get"
        return Decision.NO_OPINION, "no"

    async def rules_for(self, user: UserInfo, namespace: str) -> Rules:
        return Rules((), ())


def test_authorizer_library_asks_the_authorizer() -> None:
    act = activation(attrs(), authorizer=OnlyGet())
    ok = compile_expression("authorizer.group('').resource('secrets').namespace('ns').check('get').allowed()")
    no = compile_expression("authorizer.group('').resource('secrets').check('delete').allowed()")
    why = compile_expression("authorizer.group('').resource('secrets').check('get').reason()")
    rr = compile_expression("authorizer.requestResource.check('create').allowed()")
    assert act.evaluate(ok) == (True, "")
    assert act.evaluate(no) == (False, "")
    assert act.evaluate(why) == ("allowed get", "")
    assert act.evaluate(rr) == (False, "")


def test_variables_are_computed_once_and_failures_only_hit_readers() -> None:
    comp = [("name", compile_expression("object.metadata.name")),
            ("bad", compile_expression("object.spec.replicas")),
            ("upper", compile_expression("variables.name.upperAscii()"))]
    act = Activation(attrs(), admission_request(attrs()), composition=comp)
    assert act.evaluate(compile_expression("variables.upper == 'C'")) == (True, "")
    assert act.evaluate(compile_expression("true || variables.bad > 1")) == (True, "")
    value, err = act.evaluate(compile_expression("variables.bad > 1"))
    assert value is None
    assert err == ("expression 'variables.bad > 1' resulted in error: composited variable \"bad\" "
                   "fails to evaluate: no such key: spec")


def test_syntax_error_is_cel_gos_text() -> None:
    expr = compile_expression("object.metadata.name ==")
    assert expr.program is None and expr.error.startswith("ERROR: <input>:1:")
    act = activation(attrs())
    assert act.evaluate(expr)[1].startswith("compilation error: ERROR: <input>:1:")


def test_an_authorizer_that_would_block_is_an_errored_decision() -> None:
    class Slow(OnlyGet):
        async def authorize(self, a: AuthzAttributes) -> tuple[Decision, str]:
            await asyncio.sleep(0)
            return Decision.ALLOW, ""

    act = activation(attrs(), authorizer=Slow())
    expr = compile_expression("authorizer.group('').resource('pods').check('get').errored()")
    assert act.evaluate(expr) == (True, "")
