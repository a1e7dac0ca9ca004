"""``all()``, ``exists()`` and ``exists_one()`` fold errors as cel-go does (genericapi.apimachinery.cel.macros).

cel-go expands the quantifiers into folds over ``&&`` / ``||`` (commutative over errors: an erroring
element does not decide when another element does) and ``exists_one`` into ``p ? accu + 1 : accu``
(any error wins, the last one). The expected values below are derived from those expansions
(cel-go parser/macro.go ``makeQuantifier``, interpreter ``evalAnd``/``evalOr``/``evalTernary``/
``evalBinary``). They are checked through each entry point: the plain ``macros.run``, a CRD's
``x-kubernetes-validations`` rule (``CELValidator``) and an admission expression (``Activation``,
with whole and pruned variables).
"""

from __future__ import annotations

import copy
from typing import Any

import cel as celrust
import pytest
from genericapi.apimachinery.admission import CREATE, Attributes
from genericapi.apimachinery.cel import CELValidator, compile_schema, macros
from genericapi.apimachinery.cel.admission import Activation, admission_request, compile_expression, merge_paths
from genericapi.apimachinery.cel.library import FUNCTIONS
from genericapi.apimachinery.cel.validator import _runtime_text
from genericapi.apimachinery.user import UserInfo

OVERLOAD = "error: no such overload"
ITEMS = {"items": [{"x": 1}, {"name": "b", "spec": {}}, {"name": "c", "spec": {"x": 2}}]}

# (expression, expected): True/False/list values, or "error: <cel-go's error text>".
CASES: list[tuple[str, Any]] = [
    # the brief's examples
    ("['x', 1].exists(e, e > 0)", True),
    ("[1, 'x'].all(e, e > 5)", False),
    # an error in the first, a middle, the last element; decided elsewhere
    ("['x', 1, 2].all(e, e > 1)", False),
    ("[2, 'x', 0].all(e, e > 1)", False),
    ("[2, 3, 'x'].all(e, e > 1)", OVERLOAD),
    ("[0, 3, 'x'].all(e, e > 1)", False),
    ("['x', 0, 1].exists(e, e > 0)", True),
    ("[0, 'x', 1].exists(e, e > 0)", True),
    ("[0, 0, 'x'].exists(e, e > 0)", OVERLOAD),
    ("[1, 0, 'x'].exists(e, e > 0)", True),
    # every element erroring: the first element's error (all, exists), the last one's (exists_one)
    ("['a', 'b'].all(k, {}[k] == 1)", "error: no such key: a"),
    ("['a', 'b'].exists(k, {}[k] == 1)", "error: no such key: a"),
    ("['a', 'b'].exists_one(k, {}[k] == 1)", "error: no such key: b"),
    ("['a', 'b', 'c'].exists_one(k, k == 'c' || {}[k] == 1)", "error: no such key: b"),
    # exists_one: any error is the result, else exactly one
    ("[1, 'x', 2].exists_one(e, e > 1)", OVERLOAD),
    ("[2, 'x'].exists_one(e, e > 1)", OVERLOAD),
    ("[1, 2, 3].exists_one(e, e > 2)", True),
    ("[1, 2, 3].exists_one(e, e > 1)", False),
    ("[1, 2, 3].exists_one(e, e > 5)", False),
    # a predicate that is not a bool is an error that another element can still override
    ("[1, 2].all(e, e)", OVERLOAD),
    ("[1, false].all(e, e)", False),
    ("[1, true].exists(e, e)", True),
    # empty ranges and maps (keys)
    ("[].all(e, e > 0)", True),
    ("[].exists(e, e > 0)", False),
    ("{'a': 1, 'b': 'x'}.exists(k, k == 'b' && {'a': 1}[k] == 1 || k == 'b')", True),
    ("{'a': 1, 'b': 2}.all(k, {'a': 1}[k] == 1)", "error: no such key: b"),
    ("{'a': 1, 'b': 2}.all(k, {'a': 0}[k] == 1)", False),
    # missing fields and has()
    ("self.items.exists(i, i.name == 'b')", True),
    ("self.items.all(i, i.name != 'c')", False),
    ("self.items.all(i, i.name != '')", "error: no such key: name"),
    ("self.items.all(i, has(i.spec.x))", False),
    ("self.items.exists(i, has(i.spec.x))", True),
    ("self.items.exists(i, has(i.spec.x) && i.spec.x > 5)", "error: no such key: spec"),
    ("self.items.exists_one(i, has(i.spec.x))", "error: no such key: spec"),
    # nested macros, and macros inside map/filter whose variable the predicate reads
    ("[['x', 1], [2]].all(l, l.exists(e, e > 0))", True),
    ("[['x'], [2]].exists(l, l.exists(e, e > 0))", True),
    ("[['x'], [0]].exists(l, l.exists(e, e > 0))", OVERLOAD),
    ("[1].exists(x, self.items.exists(i, i.name == 'b' && x == 1))", True),
    ("[1, 2].map(x, self.items.exists(i, i.name == 'b' && x == 1))", [True, False]),
    ("[1, 2].filter(x, self.items.exists(i, i.name == 'c' && x == 2))", [2]),
    ("self.items.map(i, i).exists(i, i.name == 'b')", True),
    ("[[{}], [{'name': 'b'}]].exists(self, self.exists(j, j.name == 'b'))", True),
    ("[1, 2].exists(a, [a, 'x'].exists(b, b > 1)) && [['x', 3]].all(l, l.exists(e, e == 3))", True),
    # receivers of every shape: a call chain, an index, a parenthesised expression, a map literal
    ("self.items.filter(i, true).exists(i, i.name == 'c')", True),
    ("{'k': self.items}['k'].exists(i, i.name == 'c')", True),
    ("(self.items + [{'name': 'z'}]).exists(i, i.name == 'z')", True),
    ("{'a': self.items}.a.exists(i, i.name == 'z')", "error: no such key: name"),
    # logical operators are already commutative; a decided macro composes with them
    ("self.items.all(i, i.name == 'q') || true", True),
    ("self.items.exists(i, i.name == 'b') && self.items.exists(i, i.name == 'c')", True),
    ("!self.items.all(i, i.name == 'b')", True),
    ("self.items.exists(i, i.name == 'b') ? 'yes' : 'no'", "yes"),
    # comments and strings that look like macros change nothing
    ("self.items.exists(i, i.name == '.all(x, ') // ).exists(y, y)\n || ['x', 1].exists(e, e > 0)", True),
]


def _plain(expr: str) -> Any:
    variables = {"self": copy.deepcopy(ITEMS)}
    ctx = celrust.Context(functions=FUNCTIONS)
    ctx.add_variable("self", variables["self"])
    try:
        return macros.run(celrust.compile(expr), expr, ctx, lambda: variables, FUNCTIONS)
    except Exception as e:
        return f"error: {_runtime_text(e)[0]}"


@pytest.mark.parametrize(("expr", "expected"), CASES)
def test_quantifiers_fold_errors_as_cel_go(expr: str, expected: Any) -> None:
    assert _plain(expr) == expected


def _validator(rule: str) -> CELValidator:
    schema = {"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True, "x-kubernetes-validations": [
            {"rule": rule, "messageExpression": "self.items.exists(i, i.name == 'c') ? 'has c' : 'no c'"}]}}}
    validator, errs = compile_schema(schema, "spec.versions[0].schema.openAPIV3Schema")
    assert errs == [] and validator is not None, [str(e) for e in errs]
    return validator


@pytest.mark.parametrize(("expr", "expected"), [c for c in CASES if "\n" not in c[0] and (
    c[1] is True or c[1] is False or str(c[1]).startswith("error:"))])
def test_crd_rules_fold_errors_as_cel_go(expr: str, expected: Any) -> None:
    errs = [str(e) for e in _validator(expr).validate({"spec": copy.deepcopy(ITEMS)}, None)]
    if expected is True:
        assert errs == []
    elif expected is False:  # the messageExpression's own macro needs the exact fold too
        assert errs == ['spec: Invalid value: "object": has c']
    elif expected == OVERLOAD:
        assert errs == ["spec: Invalid value: \"object\": 'no such overload': call arguments did not match a "
                        f"supported operator, function or macro signature for rule: {expr}"]
    else:
        assert errs == [f'spec: Invalid value: "object": {expected.removeprefix("error: ")} evaluating rule: '
                        f"{expr}"]


@pytest.mark.parametrize("pruned", [False, True])
@pytest.mark.parametrize(("expr", "expected"), CASES)
def test_admission_expressions_fold_errors_as_cel_go(expr: str, expected: Any, pruned: bool) -> None:
    source = expr.replace("self", "object")
    compiled = compile_expression(source)
    assert compiled.program is not None, compiled.error
    attrs = Attributes(CREATE, "", "v1", "ConfigMap", "configmaps", "", "ns", "c", copy.deepcopy(ITEMS), None,
                       UserInfo("alice", ("system:authenticated",)))
    act = Activation(attrs, admission_request(attrs), paths=merge_paths([compiled]) if pruned else None)
    value, err = act.evaluate(compiled)
    if isinstance(expected, str) and expected.startswith("error: "):
        assert err == f"expression '{source}' resulted in error: {expected.removeprefix('error: ')}"
    else:
        assert (value, err) == (expected, "")


def test_variables_and_params_are_in_scope_of_the_exact_fold() -> None:
    policy_var = compile_expression("object.items.filter(i, has(i.name)).map(i, i.name)")
    expr = compile_expression("object.items.exists(i, i.name == params.want && variables.names.size() == 2)")
    attrs = Attributes(CREATE, "", "v1", "ConfigMap", "configmaps", "", "ns", "c", copy.deepcopy(ITEMS), None,
                       UserInfo("alice", ()))
    act = Activation(attrs, admission_request(attrs), {"want": "c"}, composition=[("names", policy_var)])
    assert act.evaluate(expr) == (True, "")


def test_the_fast_path_is_kept_where_nothing_can_differ() -> None:
    assert macros.fallback("self.replicas > 1 && self.name.startsWith('a')") is None
    assert macros.fallback("self.items.map(i, i.x).filter(x, x > 1).size() > 0") is None
    assert macros.fallback("'all(x, y)' == self.name") is None
    assert macros.fallback("self.items.all(i, v, v > 1)") is None  # two-variable form: the interpreter's
    assert macros.fallback("self.items.all(i, i > 1)") is not None
