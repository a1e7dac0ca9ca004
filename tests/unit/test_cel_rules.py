"""CEL x-kubernetes-validations: CRD-time compile errors and object-time evaluation, with kube's texts."""

from __future__ import annotations

from typing import Any

import pytest
from genericapi.apimachinery.cel import CELValidator, compile_schema

BASE = "spec.versions[0].schema.openAPIV3Schema"


def _spec_schema(rules: list[dict[str, Any]], **props: Any) -> dict[str, Any]:
    properties = {"replicas": {"type": "integer"}, "maxReplicas": {"type": "integer"}, "name": {"type": "string"},
                  **props}
    return {"type": "object", "properties": {"spec": {"type": "object", "properties": properties,
                                                      "x-kubernetes-validations": rules}}}


def _compile(schema: dict[str, Any]) -> CELValidator:
    validator, errs = compile_schema(schema, BASE)
    assert errs == [], [str(e) for e in errs]
    assert validator is not None
    return validator


def _errors(schema: dict[str, Any], new: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    return [str(e) for e in _compile(schema).validate(new, old)]


def _rule_errors(expr: str, value: Any, schema: dict[str, Any] | None = None) -> list[str]:
    node = dict(schema or {"type": "string"})
    node["x-kubernetes-validations"] = [{"rule": expr}]
    full = {"type": "object", "properties": {"v": node}}
    return [str(e) for e in _compile(full).validate({"v": value}, None)]


# -- compile time -----------------------------------------------------------------------------------------------------
def test_no_rules_gives_no_validator() -> None:
    assert compile_schema({"type": "object", "properties": {"a": {"type": "string"}}}, BASE) == (None, [])


def test_syntax_error_rejected_with_cel_go_text() -> None:
    validator, errs = compile_schema(_spec_schema([{"rule": "self.replicas <"}]), BASE)
    assert validator is None
    assert [str(e) for e in errs] == [
        f"{BASE}.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule"
        '{Rule:"self.replicas <", Message:"", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)'
        '(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:16: Syntax error: '
        "mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, "
        "NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | self.replicas <\n | ...............^"]
    assert errs[0].reason == "FieldValueInvalid"


def test_undefined_field_and_undeclared_reference() -> None:
    _, errs = compile_schema(_spec_schema([{"rule": "self.nosuch > 1"}, {"rule": "size(self.name) > 0 && foo(1)"},
                                           {"rule": "self.replicas > x"}]), BASE)
    details = [e.detail for e in errs]
    assert details[0] == ("compilation failed: ERROR: <input>:1:5: undefined field 'nosuch'\n | self.nosuch > 1\n"
                          " | ....^")
    assert details[1].startswith("compilation failed: ERROR: <input>:1:27: undeclared reference to 'foo' (in "
                                 "container '')")
    assert details[2].startswith("compilation failed: ERROR: <input>:1:17: undeclared reference to 'x'")


def test_macro_variables_and_dynamic_nodes_are_not_flagged() -> None:
    schema = _spec_schema([
        {"rule": "self.tags.all(t, t.startsWith('a')) && self.labels.exists(k, k == 'x')"},
        {"rule": "self.anything.whatever.deep == 1 || has(self.labels.foo)"},
        {"rule": "self.ios == 1 || self.ios == 'x'"},
    ], tags={"type": "array", "items": {"type": "string"}},
        labels={"type": "object", "additionalProperties": {"type": "string"}},
        anything={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        ios={"x-kubernetes-int-or-string": True})
    _compile(schema)


def test_escaped_property_names() -> None:
    schema = _spec_schema([{"rule": "self.my__dash__field == 'x' && self.__namespace__ == 'y'"}],
                          **{"my-field": {"type": "string"}, "namespace": {"type": "string"}})
    assert _errors(schema, {"spec": {"my-field": "x", "namespace": "z"}}) == [
        "spec: Invalid value: \"object\": failed rule: self.my__dash__field == 'x' && self.__namespace__ == 'y'"]


def test_message_expression_compile_error() -> None:
    _, errs = compile_schema(_spec_schema([{"rule": "self.replicas > 0", "messageExpression": "'a' + "}]), BASE)
    assert len(errs) == 1
    assert errs[0].field == f"{BASE}.properties[spec].x-kubernetes-validations[0].messageExpression"
    assert errs[0].detail.startswith("messageExpression compilation failed: ERROR: <input>:1:7: Syntax error:")


def test_rule_metadata_problems() -> None:
    _, errs = compile_schema(_spec_schema([
        {"rule": " "},
        {"rule": "true", "reason": "Bogus"},
        {"rule": "true", "fieldPath": ".nosuch"},
        {"rule": "true", "fieldPath": "replicas"},
        {"rule": "true", "message": "a\nb"},
        {"rule": "true\n&& true"},
    ]), BASE)
    p = f"{BASE}.properties[spec].x-kubernetes-validations"
    assert [str(e) for e in errs] == [
        f"{p}[0].rule: Required value: rule is not specified",
        f'{p}[1].reason: Unsupported value: "Bogus": supported values: "FieldValueDuplicate", '
        '"FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"',
        f'{p}[2].fieldPath: Invalid value: ".nosuch": fieldPath must be a valid path: does not refer to a valid field',
        f'{p}[3].fieldPath: Invalid value: "replicas": fieldPath must be a valid path: expected [ or . but got: '
        "replicas",
        f'{p}[4].message: Invalid value: "a\\nb": message must not contain line breaks',
        f"{p}[5].message: Required value: message must be specified if rule contains line breaks",
    ]


def test_oldself_on_uncorrelatable_items_rejected_but_allowed_in_list_map() -> None:
    items = {"type": "object", "properties": {"k": {"type": "string"}, "v": {"type": "string"}},
             "x-kubernetes-validations": [{"rule": "self.v == oldSelf.v"}]}
    schema = _spec_schema([], setlist={"type": "array", "items": items},
                          maplist={"type": "array", "x-kubernetes-list-type": "map",
                                   "x-kubernetes-list-map-keys": ["k"], "items": items})
    _, errs = compile_schema(schema, BASE)
    assert [str(e) for e in errs] == [
        f'{BASE}.properties[spec].properties[setlist].items.x-kubernetes-validations[0].rule: Invalid value: '
        f'"self.v == oldSelf.v": oldSelf cannot be used on the uncorrelatable portion of the schema within '
        f"{BASE}.properties[spec].properties[setlist].items"]


# -- type errors found when the CRD is written (typecheck) ------------------------------------------------------------
_RULE_PATH = f"{BASE}.properties[spec].x-kubernetes-validations[0]"
_TYPED_PROPS: dict[str, Any] = {
    "ratio": {"type": "number"}, "enabled": {"type": "boolean"}, "start": {"type": "string", "format": "date-time"},
    "end": {"type": "string", "format": "date-time"}, "timeout": {"type": "string", "format": "duration"},
    "tags": {"type": "array", "items": {"type": "string"}},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "ports": {"type": "array", "items": {"type": "object", "properties": {"port": {"type": "integer"}}}},
    "ios": {"x-kubernetes-int-or-string": True},
    "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
}


def _type_errors(rule: dict[str, Any]) -> list[tuple[str, str]]:
    validator, errs = compile_schema(_spec_schema([rule], **_TYPED_PROPS), BASE)
    assert (validator is None) == bool(errs)
    return [(e.field, e.detail) for e in errs]


def test_equality_between_different_types_rejected_at_the_operator() -> None:
    assert _type_errors({"rule": "self.replicas == 'three'"}) == [(
        f"{_RULE_PATH}.rule", "compilation failed: ERROR: <input>:1:15: found no matching overload for '_==_' applied "
        "to '(int, string)'\n | self.replicas == 'three'\n | ..............^")]
    for rule, types in (("self.name != 1", "'_!=_' applied to '(string, int)'"),
                        ("self.replicas == 1.5 || true", "'_==_' applied to '(int, double)'"),
                        ("self.ratio == 1", "'_==_' applied to '(double, int)'"),
                        ("self.enabled == 'yes'", "'_==_' applied to '(bool, string)'"),
                        ("self.start == 'x'", "'_==_' applied to '(google.protobuf.Timestamp, string)'"),
                        ("oldSelf.replicas == self.name", "'_==_' applied to '(int, string)'"),
                        ("(self.name == b'a')", "'_==_' applied to '(string, bytes)'")):
        errs = _type_errors({"rule": rule})
        assert len(errs) == 1 and f"found no matching overload for {types}" in errs[0][1], (rule, errs)


def test_operator_and_function_type_errors_found_by_running_a_sample() -> None:
    assert _type_errors({"rule": "self.name + 1 == 'a1'"}) == [(
        f"{_RULE_PATH}.rule", "compilation failed: ERROR: <input>:1:11: found no matching overload for '_+_' applied "
        "to '(string, int)'\n | self.name + 1 == 'a1'\n | ..........^")]
    for rule in ("self.replicas < self.name", "self.tags.all(t, t > 1)", "!self.replicas",
                 "self.replicas.lowerAscii() == 'a'", "self.ports.exists(p, p.port + 'x' == 'y')",
                 "self.labels.exists(k, self.labels[k] + 1 > 0)", "self.replicas + self.ratio > 1.0",
                 "self.replicas > oldSelf.name"):
        errs = _type_errors({"rule": rule})
        assert len(errs) == 1 and errs[0][0] == f"{_RULE_PATH}.rule", (rule, errs)
        assert errs[0][1].startswith("compilation failed: ERROR: <input>") and "found no matching overload" in \
            errs[0][1], (rule, errs)


def test_rule_must_be_bool_and_message_expression_a_string() -> None:
    for rule in ("self.replicas", "self.name", "self.replicas + 1", "self.tags", "self.enabled ? 'a' : 'b'"):
        assert _type_errors({"rule": rule}) == [(f"{_RULE_PATH}.rule", "cel expression must evaluate to a bool")], rule
    for expr in ("self.replicas", "self.tags", "size(self.name) > 0"):
        assert _type_errors({"rule": "self.replicas > 0", "messageExpression": expr}) == [
            (f"{_RULE_PATH}.messageExpression", "messageExpression must evaluate to a string")], expr
    assert _type_errors({"rule": "self.replicas > 0", "messageExpression": "'n=' + self.replicas"})[0][1].startswith(
        "messageExpression compilation failed: ERROR: <input>:1:6: found no matching overload for '_+_' applied to "
        "'(string, int)'")


def test_valid_rules_still_accepted_including_ones_failing_at_run_time_on_the_sample() -> None:
    valid = [
        "self.replicas <= self.maxReplicas", "self.replicas == 3 || self.name == 'three'", "-1 != self.replicas",
        "self.replicas < 2.5", "self.ratio >= 0.5 && self.ratio < 1", "self.enabled == true ? self.replicas > 0 : true",
        "self.start < self.end", "self.timeout > duration('1m')", "self.end - self.start > duration('1h')",
        "self.tags.all(t, t.startsWith('a')) && self.tags.size() <= 10", "self.labels.all(k, k.size() < 64)",
        "self.ports.map(p, p.port).isSorted()", "self.name.matches('^[a-z]+$')", "has(self.name) == has(self.replicas)",
        "type(self.replicas) == int", "string(self.replicas) == self.name", "self.name.size() == self.replicas",
        "self.replicas == oldSelf.replicas", "self.name.lowerAscii() == self.name", "self.replicas == 1 + 1",
        # dynamic values: the checker lets them through, so must this
        "self.ios == 1 || self.ios == 'x'", "self.ios.startsWith('a')", "self.raw.foo + 1 > 0",
        "dyn(self.replicas) == 'x'",
        # fail at run time with the sample, not compile errors in kube
        "self.labels['missing'] == 'x'", "self.tags[5] == 'a'", "self.replicas / (self.replicas - 1) > 0",
        "int(self.name) > 0", "self.name.matches(self.name + '[')", "quantity(self.name).isInteger()",
        "timestamp(self.name) > self.start", "self.tags.min() == 'a' && self.replicas % 0 == 0",
        # type errors in branches the sample does not evaluate stay unchecked (documented in typecheck)
        "self.enabled || self.name + 1 == 'x'",
    ]
    for rule in valid:
        assert _type_errors({"rule": rule}) == [], rule
    for expr in ("'replicas: ' + string(self.replicas)", "self.name", "self.labels['missing']",
                 "self.enabled ? 'a' : 'b'"):
        assert _type_errors({"rule": "self.replicas > 0", "messageExpression": expr}) == [], expr


def test_type_checks_on_scalar_list_item_and_embedded_resource_nodes() -> None:
    scalar = {"type": "object", "properties": {"v": {"type": "integer", "x-kubernetes-validations": [
        {"rule": "self == 'x'"}, {"rule": "self >= 0"}, {"rule": "self"}]}}}
    _, errs = compile_schema(scalar, BASE)
    assert [(e.field, e.detail.split("\n")[0]) for e in errs] == [
        (f"{BASE}.properties[v].x-kubernetes-validations[0].rule",
         "compilation failed: ERROR: <input>:1:6: found no matching overload for '_==_' applied to '(int, string)'"),
        (f"{BASE}.properties[v].x-kubernetes-validations[2].rule", "cel expression must evaluate to a bool")]
    items = {"type": "object", "properties": {"l": {"type": "array", "x-kubernetes-list-type": "map",
                                                    "x-kubernetes-list-map-keys": ["name"], "items": {
        "type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.n == oldSelf.n"}, {"rule": "self.name + self.n == 'x'"}]}}}}
    _, errs = compile_schema(items, BASE)
    assert [e.field for e in errs] == [f"{BASE}.properties[l].items.x-kubernetes-validations[1].rule"]
    embedded = {"type": "object", "properties": {"tpl": {"type": "object", "x-kubernetes-embedded-resource": True,
                                                         "properties": {"spec": {"type": "object"}},
                                                         "x-kubernetes-validations": [
        {"rule": "self.kind == 'Pod' && self.metadata.name.size() > 0"}, {"rule": "self.apiVersion == 1"}]}}}
    _, errs = compile_schema(embedded, BASE)
    assert [e.field for e in errs] == [f"{BASE}.properties[tpl].x-kubernetes-validations[1].rule"]
    assert _compile({"type": "object", "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('a')"}],
                     "properties": {"spec": {"type": "object", "properties": {"a": {"type": "integer"}}}}})


# -- run time ---------------------------------------------------------------------------------------------------------
def test_default_message_and_message() -> None:
    schema = _spec_schema([{"rule": "self.replicas <= self.maxReplicas"},
                           {"rule": "self.name.startsWith('a')", "message": " name must start with a "}])
    assert _errors(schema, {"spec": {"replicas": 1, "maxReplicas": 3, "name": "abc"}}) == []
    assert _errors(schema, {"spec": {"replicas": 5, "maxReplicas": 3, "name": "b"}}) == [
        'spec: Invalid value: "object": failed rule: self.replicas <= self.maxReplicas',
        'spec: Invalid value: "object": name must start with a',
    ]


def test_root_rule_path_is_nil() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object"}},
              "x-kubernetes-validations": [{"rule": "has(self.spec)"}]}
    assert _errors(schema, {"metadata": {"name": "x"}}) == [
        '<nil>: Invalid value: "object": failed rule: has(self.spec)']
    assert _errors(schema, {"spec": {}}) == []


def test_message_expression_reason_and_field_path() -> None:
    schema = _spec_schema([
        {"rule": "self.replicas > 0", "messageExpression": "'replicas is ' + string(self.replicas)",
         "reason": "FieldValueForbidden", "fieldPath": ".replicas"},
        {"rule": "self.name != ''", "reason": "FieldValueRequired", "fieldPath": ".name", "message": "set it"},
        {"rule": "self.maxReplicas < 100", "reason": "FieldValueDuplicate"},
        {"rule": "self.maxReplicas < 50", "messageExpression": "self.name", "message": "fallback"},
    ])
    errs = _compile(schema).validate({"spec": {"replicas": -1, "maxReplicas": 200, "name": ""}}, None)
    assert [(e.reason, str(e)) for e in errs] == [
        ("FieldValueForbidden", "spec.replicas: Forbidden: replicas is -1"),
        ("FieldValueRequired", "spec.name: Required value: set it"),
        ("FieldValueDuplicate", 'spec: Duplicate value: "object"'),
        ("FieldValueInvalid", 'spec: Invalid value: "object": fallback'),  # empty messageExpression result
    ]


def test_runtime_errors_rendered_as_kube() -> None:
    schema = _spec_schema([{"rule": "self.replicas > 0"}, {"rule": "self.ios > 1"}],
                          ios={"x-kubernetes-int-or-string": True})
    assert _errors(schema, {"spec": {"ios": "abc"}}) == [
        'spec: Invalid value: "object": no such key: replicas evaluating rule: self.replicas > 0',
        "spec: Invalid value: \"object\": 'no such overload': call arguments did not match a supported operator, "
        "function or macro signature for rule: self.ios > 1",
    ]
    assert _errors(schema, {"spec": {"replicas": 1, "ios": 5}}) == []


def test_rules_per_list_item_and_map_value() -> None:
    item = {"type": "string", "x-kubernetes-validations": [{"rule": "self.size() <= 3"}]}
    schema = _spec_schema([], tags={"type": "array", "items": item},
                          labels={"type": "object", "additionalProperties": item})
    assert _errors(schema, {"spec": {"tags": ["ok", "toolong"], "labels": {"a": "x", "b": "abcd"}}}) == [
        'spec.tags[1]: Invalid value: "string": failed rule: self.size() <= 3',
        'spec.labels[b]: Invalid value: "string": failed rule: self.size() <= 3',
    ]


def test_number_fields_are_doubles() -> None:
    schema = _spec_schema([{"rule": "self.ratio < 0.5"}], ratio={"type": "number"})
    assert _errors(schema, {"spec": {"ratio": 0}}) == []
    assert _errors(schema, {"spec": {"ratio": 1}}) == ['spec: Invalid value: "object": failed rule: self.ratio < 0.5']


def test_transition_rules_only_with_correlated_old_value() -> None:
    schema = _spec_schema([{"rule": "self.name == oldSelf.name", "message": "name is immutable"}])
    new = {"spec": {"name": "b", "replicas": 1}}
    assert _errors(schema, new) == []  # create: no oldSelf
    assert _errors(schema, new, {"spec": {"name": "a"}}) == ['spec: Invalid value: "object": name is immutable']
    assert _errors(schema, new, {"other": 1}) == []  # spec did not exist before


def test_transition_rules_in_list_map_correlate_by_key() -> None:
    items = {"type": "object", "properties": {"k": {"type": "string"}, "v": {"type": "integer"}},
             "x-kubernetes-validations": [{"rule": "self.v >= oldSelf.v", "message": "v may only grow"}]}
    schema = _spec_schema([], entries={"type": "array", "x-kubernetes-list-type": "map",
                                       "x-kubernetes-list-map-keys": ["k"], "items": items})
    old = {"spec": {"entries": [{"k": "a", "v": 5}, {"k": "b", "v": 1}]}}
    new = {"spec": {"entries": [{"k": "b", "v": 2}, {"k": "a", "v": 4}, {"k": "c", "v": 0}]}}
    assert _errors(schema, new, old) == ['spec.entries[1]: Invalid value: "object": v may only grow']


def test_ratcheting_keeps_unchanged_invalid_values() -> None:
    schema = _spec_schema([{"rule": "self.replicas < 10"}], other={"type": "string"})
    old = {"spec": {"replicas": 20}, "status": {}}
    assert _errors(schema, {"spec": {"replicas": 20}, "status": {"x": 1}}, old) == []
    assert _errors(schema, {"spec": {"replicas": 21}}, old) == [
        'spec: Invalid value: "object": failed rule: self.replicas < 10']


def test_resource_root_metadata_name() -> None:
    schema = {"type": "object", "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('x')"}],
              "properties": {"spec": {"type": "object"}}}
    assert _errors(schema, {"metadata": {"name": "xa"}}) == []
    assert len(_errors(schema, {"metadata": {"name": "a"}})) == 1


# -- libraries --------------------------------------------------------------------------------------------------------
LIST = {"type": "array", "items": {"type": "integer"}}


@pytest.mark.parametrize(("expr", "value", "schema"), [
    ("self.isSorted() && !([3, 1].isSorted())", [1, 2, 2], LIST),
    ("self.sum() == 6 && self.min() == 1 && self.max() == 3", [1, 2, 3], LIST),
    ("self.indexOf(2) == 1 && self.lastIndexOf(2) == 2 && self.indexOf(9) == -1", [1, 2, 2], LIST),
    ("self.charAt(1) == 'b' && self.charAt(3) == ''", "abc", None),
    ("self.indexOf('c') == 2 && self.lastIndexOf('a') == 3 && self.indexOf('a', 1) == 3", "abca", None),
    ("self.lowerAscii() == 'abc' && self.upperAscii() == 'ABC'", "aBc", None),
    ("self.replace('a', 'x') == 'xbx' && self.replace('a', 'x', 1) == 'xba'", "aba", None),
    ("self.split(',') == ['a', 'b', 'c'] && self.split(',', 2) == ['a', 'b,c']", "a,b,c", None),
    ("self.substring(1) == 'bc' && self.substring(0, 2) == 'ab'", "abc", None),
    ("self.trim() == 'x' && ['a', 'b'].join('-') == 'a-b' && ['a'].join() == 'a'", "  x \t", None),
    ("'%s has %d items, %.2f'.format([self, 3, 1.5]) == 'abc has 3 items, 1.50'", "abc", None),
    ("self.find('[0-9]+') == '12' && self.findAll('[0-9]+') == ['12', '345'] && self.findAll('[0-9]', 2).size() == 2",
     "a12b345", None),
    ("self.matches('^[a-z]+$')", "abc", None),
    ("isURL(self) && url(self).getScheme() == 'https' && url(self).getHost() == 'example.com:8080' && "
     "url(self).getHostname() == 'example.com' && url(self).getPort() == '8080' && "
     "url(self).getEscapedPath() == '/a%20b' && url(self).getQuery() == {'x': ['1', '2']}",
     "https://example.com:8080/a b?x=1&x=2", None),
    ("!isURL(self) && isURL('/abs')", "../relative", None),
    ("isQuantity(self) && quantity(self).isGreaterThan(quantity('1Gi')) && quantity(self).sign() == 1 && "
     "quantity(self).isInteger() && quantity(self).asInteger() == 2147483648 && "
     "quantity('1').isLessThan(quantity(self)) && quantity('100m').compareTo(quantity('0.1')) == 0 && "
     "quantity('1').add(quantity('500m')).asApproximateFloat() == 1.5 && quantity('2').sub(1).asInteger() == 1 && "
     "!quantity('1500m').isInteger() && !isQuantity('1.1.1')",
     "2Gi", None),
    ("isIP(self) && ip(self).family() == 4 && ip('::1').isLoopback() && !isIP('1.2.3') && "
     "cidr('10.0.0.0/8').containsIP(self) && cidr('10.0.0.0/8').prefixLength() == 8 && "
     "cidr('10.1.2.3/8').masked() == cidr('10.0.0.0/8') && isCIDR('10.0.0.0/8') && !isCIDR('10.0.0.0')",
     "10.1.2.3", None),
    ("self.all(x, x > 0) && self.exists(x, x == 2) && self.exists_one(x, x == 3) && "
     "self.map(x, x * 2) == [2, 4, 6] && self.filter(x, x > 1).size() == 2", [1, 2, 3], LIST),
])
def test_library_functions(expr: str, value: Any, schema: dict[str, Any] | None) -> None:
    assert _rule_errors(expr, value, schema) == []


@pytest.mark.parametrize(("expr", "value", "needle"), [
    ("self.charAt(9) == ''", "abc", "index out of range: 9 evaluating rule"),
    ("self.substring(2, 1) == ''", "abc", "invalid substring range. start: 2, end: 1"),
    ("quantity(self).sign() == 1", "1.1.1", "quantities must match the regular expression"),
    ("url(self).getScheme() == ''", "::bad", "URL parse error during conversion from string"),
    ("ip(self).family() == 4", "1.2.3", "parse error during conversion from string"),
])
def test_library_errors(expr: str, value: Any, needle: str) -> None:
    errs = _rule_errors(expr, value)
    assert len(errs) == 1 and needle in errs[0], errs


def test_library_false_results_fail() -> None:
    assert _rule_errors("self.isSorted()", [3, 1], LIST) == ['v: Invalid value: "array": failed rule: self.isSorted()']
    assert _rule_errors("quantity(self).isLessThan(quantity('1'))", "2") == [
        "v: Invalid value: \"string\": failed rule: quantity(self).isLessThan(quantity('1'))"]


# -- quantity/url/ip/cidr values compare by value, as kube's Equal does ---------------------------------------------
@pytest.mark.parametrize(("expr", "expected"), [
    ("quantity('1') == quantity('1000m')", True),
    ("quantity('1Ki') == quantity('1024')", True),
    ("quantity('1.5') == quantity('1500m')", True),
    ("quantity('1e-10') == quantity('1n')", True),  # parsing rounds up to nano, as resource.ParseQuantity does
    ("quantity('1') == quantity('1001m')", False),
    ("quantity('1') != quantity('2')", True),
    ("quantity('1').add(quantity('500m')) == quantity('1.5')", True),
    ("quantity('2Gi').sub(quantity('1Gi')) == quantity('1Gi')", True),
    ("quantity('1') in [quantity('1000m'), quantity('2')]", True),
    ("[quantity('1'), quantity('2')].indexOf(quantity('2000m')) == 1", True),
    ("quantity('2Gi').isGreaterThan(quantity('2000Mi')) && quantity('1000m').compareTo(quantity('1')) == 0", True),
    ("quantity('999m').isLessThan(quantity('1')) && quantity('1').compareTo(quantity('2')) == -1", True),
    ("ip('::1') == ip('0:0:0:0:0:0:0:1')", True),
    ("ip('10.0.0.1') == ip('10.0.0.2')", False),
    ("cidr('fd00::/8') == cidr('fd00:0::/8')", True),
    ("cidr('10.0.0.1/8') == cidr('10.0.0.0/8')", False),  # netip.Prefix keeps host bits: not masked
    ("cidr('10.0.0.1/8').masked() == cidr('10.0.0.0/8')", True),
    ("url('HTTPS://example.com/a') == url('https://example.com/a')", True),
    ("url('https://example.com/a') == url('https://example.com/b')", False),
])
def test_ext_values_compare_semantically(expr: str, expected: bool) -> None:
    errs = _rule_errors(expr if expected else f"!({expr})", "x")
    assert errs == [], errs


def test_ext_values_have_no_ordering_operator() -> None:
    # kube has no '<' for quantities and refuses the rule when the CRD is written; so does the sample run
    full = {"type": "object", "properties": {"v": {"type": "string", "x-kubernetes-validations": [
        {"rule": "quantity('1') < quantity('2')"}]}}}
    validator, errs = compile_schema(full, BASE)
    assert validator is None
    assert [e.field for e in errs] == [f"{BASE}.properties[v].x-kubernetes-validations[0].rule"]
    assert errs[0].detail.startswith("compilation failed: ERROR: <input>: found no matching overload"), errs


def test_quantity_equality_in_a_rule_on_object_values() -> None:
    schema = _spec_schema([{"rule": "quantity(self.a) == quantity(self.b)", "message": "must match"}],
                          a={"type": "string"}, b={"type": "string"})
    assert _errors(schema, {"spec": {"a": "1Gi", "b": "1024Mi"}}) == []
    assert _errors(schema, {"spec": {"a": "1Gi", "b": "1G"}}) == ['spec: Invalid value: "object": must match']


# -- x-kubernetes-validations under allOf/anyOf/oneOf/not: kube 1.33 refuses them in CRDs ---------------------------
@pytest.mark.parametrize("junctor", ["allOf", "anyOf", "oneOf"])
def test_rules_under_junctors_are_not_structural(junctor: str) -> None:
    from extensionsapi.schema.structural import validate_structural
    schema = {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"a": {"type": "integer"}},
        junctor: [{"x-kubernetes-validations": [{"rule": "self.a > 0"}]}]}}}
    errs = [str(e) for e in validate_structural(schema, "spec.validation.openAPIV3Schema")]
    assert errs == [f"spec.validation.openAPIV3Schema.properties[spec].{junctor}[0].x-kubernetes-validations: "
                    "Forbidden: must be empty to be structural"]


def test_rules_under_not_are_not_structural() -> None:
    from extensionsapi.schema.structural import validate_structural
    schema = {"type": "object", "properties": {"spec": {
        "type": "object", "not": {"properties": {"a": {"x-kubernetes-validations": [{"rule": "self > 0"}]}}},
        "properties": {"a": {"type": "integer"}}}}}
    errs = [str(e) for e in validate_structural(schema, "s")]
    assert errs == ["s.properties[spec].not.properties[a].x-kubernetes-validations: Forbidden: "
                    "must be empty to be structural"]


# -- format date-time/date/duration/byte strings are timestamps/durations/bytes in rules ---------------------------
def _window_schema(rule: str) -> dict[str, Any]:
    return _spec_schema([{"rule": rule, "message": "bad window"}],
                        start={"type": "string", "format": "date-time"}, end={"type": "string", "format": "date-time"},
                        day={"type": "string", "format": "date"}, timeout={"type": "string", "format": "duration"},
                        blob={"type": "string", "format": "byte"})


@pytest.mark.parametrize(("rule", "spec", "ok"), [
    # compared as instants, not text: 02:00+02:00 is before 01:00Z
    ("self.start < self.end", {"start": "2024-01-01T02:00:00+02:00", "end": "2024-01-01T01:00:00Z"}, True),
    ("self.start < self.end", {"start": "2024-01-01T10:00:00Z", "end": "2024-01-01T09:00:00Z"}, False),
    ("self.end - self.start <= duration('1h')", {"start": "2024-01-01T00:00:00Z", "end": "2024-01-01T00:30:00Z"},
     True),
    ("self.start + self.timeout < self.end",
     {"start": "2024-01-01T00:00:00Z", "end": "2024-01-01T00:30:00Z", "timeout": "1h"}, False),
    ("self.start.getFullYear() == 2024 && self.start == timestamp('2024-03-01T00:00:00Z')",
     {"start": "2024-03-01T00:00:00.000Z"}, True),
    ("self.day < timestamp('2024-03-01T00:00:00Z')", {"day": "2024-02-29"}, True),
    ("self.timeout > duration('90s') && duration(self.timeout) == duration('2m')", {"timeout": "2m"}, True),
    ("self.timeout == duration('72h')", {"timeout": "3 days"}, True),  # strfmt's loose durations
    ("self.timeout < duration('1s')", {"timeout": "1.5s"}, False),
    ("size(self.blob) == 2 && self.blob == b'ab'", {"blob": "YWI="}, True),
])
def test_typed_formats(rule: str, spec: dict[str, Any], ok: bool) -> None:
    errs = _errors(_window_schema(rule), {"spec": spec})
    assert errs == ([] if ok else ['spec: Invalid value: "object": bad window']), errs


def test_typed_formats_old_self_and_plain_strings() -> None:
    schema = _spec_schema([{"rule": "self.start >= oldSelf.start", "message": "start cannot move back"}],
                          start={"type": "string", "format": "date-time"}, note={"type": "string"})
    old = {"spec": {"start": "2024-01-01T00:00:00Z"}}
    assert _errors(schema, {"spec": {"start": "2024-01-01T01:00:00+02:00"}}, old) == [
        'spec: Invalid value: "object": start cannot move back']
    assert _errors(schema, {"spec": {"start": "2024-01-01T01:00:00-02:00"}}, old) == []
    # a string without a typed format stays a string
    plain = _spec_schema([{"rule": "self.note.startsWith('2024')"}], note={"type": "string"})
    assert _errors(plain, {"spec": {"note": "2024-01-01T00:00:00Z"}}) == []
