"""Label selector parsing, validation messages and matching (k8s.io/apimachinery/pkg/labels)."""

from __future__ import annotations

import pytest
from genericapi.apimachinery.labels import (
    LabelSelector,
    LabelSelectorError,
    format_label_selector_object,
    format_labels,
    from_label_selector_object,
    new_requirement,
    parse_label_selector,
    selector_from_set,
)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("x=a", "x=a"),
        ("x==a", "x==a"),
        ("x!=a", "x!=a"),
        ("x", "x"),
        ("!x", "!x"),
        ("x in (b,a)", "x in (a,b)"),
        ("x notin (a)", "x notin (a)"),
        ("x>1", "x>1"),
        ("x<10", "x<10"),
        ("z=1,a=2", "a=2,z=1"),  # sorted by key
        ("x in (foo,,baz),y,z notin ()", "x in (,baz,foo),y,z notin ()"),
        ("x=", "x="),
        ("  x = a  ,  y  ", "x=a,y"),
        ("app.kubernetes.io/name=web", "app.kubernetes.io/name=web"),
        ("x in (in,notin)", "x in (in,notin)"),
    ],
)
def test_parse_canonical_form(text: str, canonical: str) -> None:
    assert str(parse_label_selector(text)) == canonical


def test_empty_selector_matches_everything() -> None:
    selector = parse_label_selector("")
    assert selector.empty
    assert selector.matches(None)
    assert selector.matches({"a": "b"})
    assert parse_label_selector("   ").empty


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("x=a", {"x": "a"}, True),
        ("x=a", {"x": "b"}, False),
        ("x=a", {}, False),
        ("x!=a", {}, True),
        ("x!=a", {"x": "a"}, False),
        ("x in (a,b)", {"x": "b"}, True),
        ("x in (a,b)", {"x": "c"}, False),
        ("x notin (a,b)", {"y": "a"}, True),
        ("x notin (a,b)", {"x": "a"}, False),
        ("x", {"x": ""}, True),
        ("x", {"y": "1"}, False),
        ("!x", {"y": "1"}, True),
        ("!x", {"x": "1"}, False),
        ("x>5", {"x": "6"}, True),
        ("x>5", {"x": "5"}, False),
        ("x>5", {"x": "abc"}, False),
        ("x<5", {"x": "-3"}, True),
        ("x<5", {"x": "+4"}, True),
        ("x<5", {}, False),
        ("a=1,b=2", {"a": "1", "b": "2"}, True),
        ("a=1,b=2", {"a": "1", "b": "3"}, False),
    ],
)
def test_matches(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(text).matches(labels) is expected


def test_matches_none_labels_as_empty() -> None:
    assert parse_label_selector("!x").matches(None)
    assert not parse_label_selector("x").matches(None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x=a,", "found '', expected: identifier after ','"),
        ("x=a b", "found 'b', expected: ',' or 'end of string'"),
        ("=a", "found '=', expected: !, identifier, or 'end of string'"),
        ("x in a", "unable to parse requirement: found 'a' expected: '('"),
        ("x in (a b)", "unable to parse requirement: found 'b', expected: ',' or ')'"),
        ("x (a)", "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt"),
        ("x=(a)", "unable to parse requirement: found '(', expected: identifier"),
        ("!=a", "found '!=', expected: !, identifier, or 'end of string'"),
        ("!x=a", "found '=', expected: ',' or 'end of string'"),
        (
            "x<-1",
            'unable to parse requirement: values[0][x]: Invalid value: "-1": a valid label must be an '
            "empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
            "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
        (
            "x>a",
            'unable to parse requirement: values[0]: Invalid value: "a": '
            "for 'Gt', 'Lt' operators, the value must be an integer",
        ),
    ],
)
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(LabelSelectorError) as info:
        parse_label_selector(text)
    assert str(info.value) == message


def test_bad_key_message_uses_nil_path() -> None:
    with pytest.raises(LabelSelectorError) as info:
        parse_label_selector("-x=a")
    assert str(info.value) == (
        'unable to parse requirement: <nil>: Invalid value: "-x": name part must consist of alphanumeric '
        "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  "
        "or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    )


def test_bad_prefix_and_too_many_slashes() -> None:
    with pytest.raises(LabelSelectorError, match=r"prefix part a lowercase RFC 1123 subdomain"):
        parse_label_selector("Foo.com/x")
    with pytest.raises(LabelSelectorError, match=r"a qualified name must consist of"):
        parse_label_selector("a/b/c")
    with pytest.raises(LabelSelectorError, match=r"name part must be no more than 63 characters"):
        parse_label_selector("k" * 64)


def test_bad_value_message() -> None:
    with pytest.raises(LabelSelectorError) as info:
        parse_label_selector("app=-bad")
    assert str(info.value).startswith(
        'unable to parse requirement: values[0][app]: Invalid value: "-bad": a valid label must be an empty '
        "string or consist of alphanumeric characters"
    )
    with pytest.raises(LabelSelectorError, match=r"must be no more than 63 characters"):
        parse_label_selector("app=" + "v" * 64)


def test_from_label_selector_object() -> None:
    selector = from_label_selector_object(
        {
            "matchLabels": {"app": "web", "tier": "fe"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "dev"]},
                {"key": "canary", "operator": "DoesNotExist"},
            ],
        }
    )
    assert str(selector) == "app=web,!canary,env in (dev,prod),tier=fe"
    assert selector.matches({"app": "web", "tier": "fe", "env": "dev"})
    assert not selector.matches({"app": "web", "tier": "fe", "env": "dev", "canary": "1"})


def test_from_label_selector_object_nil_and_empty() -> None:
    assert from_label_selector_object(None).matches_nothing
    assert not from_label_selector_object(None).matches({})
    assert from_label_selector_object({}).empty
    assert from_label_selector_object({"matchLabels": {}}).matches({"a": "b"})


def test_from_label_selector_object_errors() -> None:
    with pytest.raises(LabelSelectorError) as info:
        from_label_selector_object({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})
    assert str(info.value) == '"Gt" is not a valid pod selector operator'
    with pytest.raises(LabelSelectorError) as info:
        from_label_selector_object({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})
    assert str(info.value) == (
        "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty"
    )
    with pytest.raises(LabelSelectorError) as info:
        from_label_selector_object(
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}
        )
    assert "values set must be empty for exists and does not exist" in str(info.value)


def test_new_requirement_aggregates_errors() -> None:
    with pytest.raises(LabelSelectorError) as info:
        new_requirement("-k", "=", ["a", "b"])
    message = str(info.value)
    assert message.startswith('[key: Invalid value: "-k": ')
    assert (
        'values: Invalid value: []string{"a", "b"}: exact-match compatibility requires one single value]'
        in message
    )


def test_requires_exact_match_and_equality() -> None:
    selector = parse_label_selector("a=1,b in (2),c in (3,4)")
    assert selector.requires_exact_match("a") == "1"
    assert selector.requires_exact_match("b") == "2"
    assert selector.requires_exact_match("c") is None
    assert selector.requires_exact_match("d") is None
    assert parse_label_selector("b=2,a=1") == parse_label_selector("a=1,b=2")
    assert LabelSelector.nothing() != LabelSelector.everything()


def test_selector_from_set_and_formatting() -> None:
    assert str(selector_from_set({"b": "2", "a": "1"})) == "a=1,b=2"
    assert selector_from_set(None).empty
    assert format_labels({"b": "2", "a": "1"}) == "a=1,b=2"
    assert format_labels({}) == "<none>"
    assert format_label_selector_object({}) == "<none>"
    assert format_label_selector_object({"matchLabels": {"app": "x"}}) == "app=x"
    assert format_label_selector_object({"matchExpressions": [{"key": "a", "operator": "Bad"}]}) == "<error>"
