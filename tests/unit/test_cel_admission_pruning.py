"""Admission CEL hands the interpreter only the parts of each variable the expressions read, binds
each variable once per activation, and runs an expression that calls none of kube's library
functions in a context without them (genericapi.apimachinery.cel.admission). None of it may ever
change a result: these tests run the same expressions with whole values and with pruned ones, and
in the context with every function, over hand-picked edge cases (has(), indexing, macros,
shadowing, string literals, comments, null oldObject, variables, messageExpression,
auditAnnotations, library calls, fields named like functions) and over expressions and objects
Hypothesis generates, and compare every value and every error text.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from genericapi.apimachinery.admission import CREATE, UPDATE, Attributes
from genericapi.apimachinery.cel.admission import (
    Activation,
    Expression,
    admission_request,
    compile_expression,
    merge_paths,
    prune,
    read_paths,
)
from genericapi.apimachinery.policy.compiled import DENY, CompiledPolicy
from genericapi.apimachinery.user import UserInfo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

KEYS = ["metadata", "spec", "data", "name", "labels", "x", "y", "items"]
VARS = ["object", "oldObject", "params", "request", "namespaceObject"]


def attrs(obj: dict[str, Any] | None, old: dict[str, Any] | None) -> Attributes:
    return Attributes(UPDATE if old is not None else CREATE, "", "v1", "ConfigMap", "configmaps", "", "ns", "c",
                      obj, old, UserInfo("alice", ("devs", "system:authenticated")))


def _normal(value: Any) -> Any:
    """Lists in an order-free form: a map's keys come out of the interpreter (as out of cel-go's Go
    maps) in a different order on each run, so ``m.map(k, k)`` is compared as a multiset."""
    if isinstance(value, list):
        return ("list", sorted(repr(_normal(v)) for v in value))
    if isinstance(value, dict):
        return ("map", sorted((repr(k), repr(_normal(v))) for k, v in value.items()))
    return value


def outcome(act: Activation, expr: Expression) -> tuple[str, Any]:
    try:
        value, err = act.evaluate(expr)
    except BaseException as e:  # the interpreter's panics are BaseException: compared by type
        return "raised", type(e).__name__
    return ("error", err) if err else ("value", _normal(value))


def both(exprs: list[Expression], obj: Any, old: Any, params: Any = None, request: Any = None,
         namespace: Any = None, composition: list[tuple[str, Expression]] | None = None,
         ) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """Each expression's outcome with whole values and with the values pruned to what they all read."""
    results = []
    every = exprs + [e for _n, e in composition or []]
    for paths in (None, merge_paths(every)):
        a = attrs(copy.deepcopy(obj), copy.deepcopy(old))
        act = Activation(a, copy.deepcopy(request) if request is not None else admission_request(a),
                         copy.deepcopy(params), copy.deepcopy(namespace), composition=list(composition or []),
                         paths=paths)
        results.append([outcome(act, e) for e in exprs])
    return results[0], results[1]


def assert_same(exprs: list[Expression], obj: Any, old: Any, params: Any = None, request: Any = None,
                namespace: Any = None) -> None:
    """Pruned outcomes equal whole ones. The interpreter walks a map's keys in a random order and
    stops at the first error (``m.all(k, ...)`` over keys where one is false and one fails), so an
    outcome that differs is accepted only if whole values also give it on some of 30 more runs."""
    whole, pruned = both(exprs, obj, old, params, request, namespace)
    forced = [dataclasses.replace(e, functions=True) for e in exprs]
    with_functions, _ = both(forced, obj, old, params, request, namespace)
    for i, e in enumerate(exprs):
        for other in (pruned[i], with_functions[i]):
            if other == whole[i]:
                continue
            seen = [both([e], obj, old, params, request, namespace)[0][0] for _ in range(30)]
            assert other in seen, (e.source, other, seen)


CONFIGMAP: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "c", "namespace": "ns", "labels": {"a": "b", "x": "1"}, "annotations": {"n": "v"}},
             "data": {"k": "v", "big": "x" * 50, "x": "y"}, "spec": {"x": 1, "y": {"x": 2}, "items": [1, 2]}}

EDGE_CASES = [
    "object.metadata.name == 'c'",
    "has(object.metadata.labels)",
    "has(object.spec.x)",
    "has(object.spec.missing)",
    "has(object.status)",
    "object['metadata']['name']",
    "object.metadata['labels']",
    "object.data.all(k, object.data[k].size() < 40)",
    "object.data.exists(k, k == 'big')",
    "object.data.map(k, k).size()",
    "object.data.filter(k, k != 'x')",
    "object.all(k, k != 'status')",
    "object.exists(k, k == 'spec')",
    "size(object)",
    "object.size()",
    "size(object.metadata)",
    "'spec' in object",
    "'x' in object.spec",
    "object.metadata.labels.size() == 2",
    "object.metadata == oldObject.metadata",
    "object == oldObject",
    "oldObject == null",
    "oldObject.metadata.name == 'c'",
    "has(oldObject.spec)",
    "oldObject != null && oldObject.spec.x == object.spec.x",
    "type(object.spec) == map",
    "string(object.spec.x)",
    "string(object.metadata)",
    "dyn(object).metadata.name",
    "[object][0].spec.y",
    "[object.spec][0].items",
    "(object).spec",
    "object.spec.items.exists(object, object == 2)",
    "[1, 2].all(object, object > 0)",
    "[1].map(params, params + 1)[0] == 2",
    "'object.data.k' == object.data.k",
    "\"object.metadata.annotations\".size() > 0",
    "object.spec.x == 1 // object.data don't '''",
    "object.spec.x == 1 // '''\n && object.metadata.annotations.n == 'v'",
    "object . spec . y . x == 2",
    "object.spec.y.x + 1",
    "object.spec.missing.x",
    "object.metadata.name.x",
    "request.userInfo.username == 'alice'",
    "request.object.metadata.name",
    "request.userInfo",
    "request.operation",
    "request.oldObject == null",
    "params == null",
    "params.spec.x",
    "namespaceObject.metadata.name",
    "namespaceObject == null",
    "object.metadata.labels.x == '1' ? object.data : oldObject.data",
    "object.metadata.name.upperAscii() == 'C'",
    "object.data.big.indexOf('x') == 0",
    "quantity('1Gi').isGreaterThan(quantity('1Mi'))",
    "object.metadata.name.nosuchfunction()",
    "nosuchfunction(object)",
    "object.spec.name == null",
    "has(object.metadata.namespace) && object.metadata.namespace == 'ns'",
    "string(object.spec.x) + object.metadata.name",
    "object.data.k.size() == 1",
]


def test_read_paths_records_selections_and_whole_uses() -> None:
    assert read_paths("object.metadata.name.size() > 1") == {"object": frozenset({("metadata", "name")})}
    assert read_paths("object.data.all(k, object.data[k] != '')") == {"object": frozenset({("data",)})}
    assert read_paths("has(object.spec.x) && oldObject.spec == null") == {
        "object": frozenset({("spec", "x")}), "oldObject": frozenset({("spec",)})}
    assert read_paths("object['spec']") == {"object": None}
    assert read_paths("size(object) > 0 && object.spec.x == 1") == {"object": None}
    assert read_paths("object.all(k, true)") == {"object": None}
    assert read_paths("request.object.metadata") == {"request": frozenset({("object", "metadata")})}
    assert read_paths("'object.spec' == params.x") == {"params": frozenset({("x",)})}
    assert read_paths("params.x // object.spec") == {"params": frozenset({("x",)})}
    assert read_paths("params.x // it's\n || object.spec.x") == {
        "params": frozenset({("x",)}), "object": frozenset({("spec", "x")})}


def test_prune_keeps_named_subtrees_whole_and_drops_the_rest() -> None:
    paths = merge_paths([compile_expression("object.metadata.name == 'c'"),
                         compile_expression("object.spec.y.x == 2 && has(object.spec.none)")])
    pruned = prune(CONFIGMAP, paths["object"])
    assert pruned == {"metadata": {"name": "c"}, "spec": {"y": {"x": 2}}}
    assert CONFIGMAP["spec"]["x"] == 1  # the input is not changed
    wider = merge_paths([compile_expression("object.spec.x == 1"), compile_expression("object.spec.size() > 0")])
    assert prune(CONFIGMAP, wider["object"]) == {"spec": CONFIGMAP["spec"]}
    assert prune(None, frozenset({("spec",)})) is None
    assert prune(CONFIGMAP, None) is CONFIGMAP


def test_edge_cases_give_the_same_outcome_pruned_or_whole() -> None:
    old = copy.deepcopy(CONFIGMAP)
    old["spec"]["x"] = 3
    exprs = [compile_expression(s) for s in EDGE_CASES]
    assert all(e.program is not None for e in exprs), [e.error for e in exprs if e.program is None]
    ns = {"metadata": {"name": "ns", "labels": {"a": "b"}}, "spec": {}, "status": {}}
    for old_obj in (None, old):
        for params in (None, {"spec": {"x": 1}, "data": {"a": "b"}}):
            assert_same(exprs, CONFIGMAP, old_obj, params, namespace=ns)
            for e in exprs:  # each expression alone (the narrowest pruning) as well
                assert_same([e], CONFIGMAP, old_obj, params, namespace=ns)
    whole, _ = both(exprs, CONFIGMAP, old, {"spec": {"x": 1}}, namespace=ns)
    assert ("value", True) in whole and any(kind == "error" for kind, _ in whole)  # both kinds are exercised


def test_variables_composed_from_pruned_values() -> None:
    comp = [("spec", compile_expression("object.spec")),
            ("labels", compile_expression("object.metadata.labels")),
            ("whole", compile_expression("oldObject")),
            ("n", compile_expression("variables.spec.y.x + size(variables.labels)"))]
    exprs = [compile_expression(s) for s in (
        "variables.spec == object.spec", "variables.n == 4", "variables.labels.size()", "variables.whole == null",
        "variables.spec.items.all(i, i > 0)", "variables.whole.data.k")]
    old = copy.deepcopy(CONFIGMAP)
    for old_obj in (None, old):
        whole, pruned = both(exprs, CONFIGMAP, old_obj, composition=comp)
        assert pruned == whole
        assert whole[1] == ("value", True)


def test_calls_of_library_functions_are_found() -> None:
    assert not compile_expression("object.metadata.name.size() < 64 && has(object.spec.name)").functions
    assert not compile_expression("object.metadata.namespace == 'find(' && size(object) > 0").functions
    assert compile_expression("object.metadata.name.lowerAscii() == 'a'").functions
    assert compile_expression("quantity('1')").functions
    assert compile_expression("authorizer.group('').resource('pods').check('get').allowed()").functions


def test_activations_interleaved_on_one_thread_keep_their_own_values() -> None:
    """Bind-once: each activation's values are rebound when another activation used the context."""
    expr = compile_expression("object.metadata.name + '/' + string(params.x)")
    acts = []
    for i in range(3):
        obj = {"metadata": {"name": f"n{i}"}}
        acts.append(Activation(attrs(obj, None), {}, {"x": i}, paths=merge_paths([expr])))
    for _ in range(2):
        for i, act in enumerate(acts):
            assert act.evaluate(expr) == (f"n{i}/{i}", "")
    only_old = compile_expression("oldObject == null")
    updated = Activation(attrs({"metadata": {}}, {"metadata": {}}), {})
    assert updated.evaluate(only_old) == (False, "")
    assert acts[0].evaluate(only_old) == (True, "")


def _policy(validations: list[dict[str, Any]], variables: list[dict[str, Any]],
            audit: list[dict[str, Any]], conditions: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {
        "failurePolicy": "Fail", "validations": validations, "variables": variables,
        "auditAnnotations": audit, "matchConditions": conditions}}


def _run_policy(policy: dict[str, Any], obj: Any, old: Any, params: Any, pruned: bool) -> Any:
    compiled = CompiledPolicy.compile(policy)
    if not pruned:
        compiled.paths = None
    a = attrs(copy.deepcopy(obj), copy.deepcopy(old))
    decisions, audit = compiled.validate(Activation(a, admission_request(a), copy.deepcopy(params)))
    return decisions, audit


def test_policy_messages_audit_annotations_and_conditions_pruned_or_whole() -> None:
    policy = _policy(
        validations=[
            {"expression": "object.spec.x < 1", "messageExpression": "'x of ' + object.metadata.name + ' is ' + "
                                                                    "string(object.spec.x)"},
            {"expression": "variables.big", "messageExpression": "string(object.data)"},
            {"expression": "object.data.all(k, k.size() < 3)", "message": "short keys"},
            {"expression": "params.spec.x == object.spec.x", "messageExpression": "string(params)"},
            {"expression": "oldObject == null || oldObject.spec.y == object.spec.y"},
            {"expression": "object.spec.none == 1"},
            {"expression": "object.metadata.labels.a == 'b'", "messageExpression": "object.spec.nope"},
        ],
        variables=[{"name": "big", "expression": "object.data.big.size() < 10"}],
        audit=[{"key": "name", "valueExpression": "object.metadata.name + '-' + object.metadata.labels.x"},
               {"key": "spec", "valueExpression": "string(object.spec.items)"},
               {"key": "bad", "valueExpression": "object.missing"}],
        conditions=[{"name": "ns", "expression": "request.namespace == 'ns' && has(object.metadata.labels)"}],
    )
    old = copy.deepcopy(CONFIGMAP)
    old["spec"]["y"] = {"x": 9}
    for old_obj in (None, old):
        for params in (None, {"spec": {"x": 2}}):
            whole = _run_policy(policy, CONFIGMAP, old_obj, params, pruned=False)
            assert _run_policy(policy, CONFIGMAP, old_obj, params, pruned=True) == whole
            assert [d.action for d in whole[0]].count(DENY) >= 3 and whole[1]


# --- generated expressions over generated objects -------------------------------------------------

_leaf = st.one_of(st.none(), st.integers(-3, 3), st.sampled_from(["x", "y", "", "ab"]), st.booleans())
_value = st.recursive(_leaf, lambda ch: st.dictionaries(st.sampled_from(KEYS), ch, max_size=4)
                      | st.lists(ch, max_size=3), max_leaves=14)
_object = st.dictionaries(st.sampled_from(KEYS), _value, max_size=5)


@st.composite
def _path(draw: Any, var: str | None = None) -> str:
    var = var or draw(st.sampled_from(VARS))
    keys = draw(st.lists(st.sampled_from(KEYS), max_size=3))
    sep = draw(st.sampled_from([".", " . "]))
    return var + "".join(sep + k for k in keys)


@st.composite
def _expr(draw: Any, depth: int = 0) -> str:
    p = draw(_path())
    q = draw(_path())
    k = draw(st.sampled_from(KEYS))
    forms = [
        p, f"{p} == {q}", f"has({p}.{k})", f"size({p})", f"{p}.size()", f"{p}['{k}']", f"'{k}' in {p}",
        f"{p}.all(e, e == '{k}')", f"{p}.exists(e, has({q}.{k}) || e == 1)", f"{p}.map(e, e)",
        f"{p}.filter(e, e != 'y')", f"{p}.exists(object, object == 'x')", f"string({p})", f"type({p}) == map",
        f"[{p}][0]", f"[{p}][0].{k}", f"dyn({p}).{k}", f"'{p}' == '{k}'", f"{p} == null", f"{p}.{k} + 1",
        f"{p} // {q}.{k} '''\n", f"{p}.all(e, {q}[e] == 1)",
    ]
    form = draw(st.sampled_from(forms))
    if depth < 2 and draw(st.booleans()):
        other = draw(_expr(depth + 1))
        op = draw(st.sampled_from(["&&", "||", "==", "?"]))
        if op == "?":
            return f"({form}) == null ? ({other}) : ({p})"
        return f"({form}) {op} ({other})"
    return form


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sources=st.lists(_expr(), min_size=1, max_size=4), obj=_object,
       old=st.one_of(st.none(), _object), params=st.one_of(st.none(), _object),
       request=_object, namespace=st.one_of(st.none(), _object))
def test_generated_expressions_give_the_same_outcome_pruned_or_whole(
        sources: list[str], obj: dict[str, Any], old: dict[str, Any] | None, params: dict[str, Any] | None,
        request: dict[str, Any], namespace: dict[str, Any] | None) -> None:
    exprs = [compile_expression(s) for s in sources]
    assert_same(exprs, obj, old, params, request, namespace)
    for e in exprs:  # the narrowest pruning: one expression alone
        assert_same([e], obj, old, params, request, namespace)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(variable=_expr(), validation=_expr(), message=_expr(), audit=_expr(), obj=_object,
       old=st.one_of(st.none(), _object), params=st.one_of(st.none(), _object))
def test_generated_policies_decide_the_same_pruned_or_whole(
        variable: str, validation: str, message: str, audit: str, obj: dict[str, Any],
        old: dict[str, Any] | None, params: dict[str, Any] | None) -> None:
    policy = _policy(
        validations=[{"expression": f"variables.v == null || ({validation}) == true", "messageExpression": message},
                     {"expression": "variables.v != null", "messageExpression": f"string({message})"}],
        variables=[{"name": "v", "expression": variable}],
        audit=[{"key": "a", "valueExpression": f"string({audit})"}], conditions=[])
    pruned = _run_policy(policy, obj, old, params, pruned=True)
    if pruned != _run_policy(policy, obj, old, params, pruned=False):  # see assert_same: map order
        assert any(pruned == _run_policy(policy, obj, old, params, pruned=False) for _ in range(30))
