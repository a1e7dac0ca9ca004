"""Label selectors: the ``labelSelector`` query parameter and ``metav1.LabelSelector`` objects.

List and watch filter every object through a label selector, so the parser mirrors
``k8s.io/apimachinery/pkg/labels`` (same grammar, same error text clients and tests match on)
and a parsed selector is a flat tuple of compiled requirements that ``matches`` walks without
allocating.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from genericapi.apimachinery.gofmt import go_quote, string_slice

# Operators as ``k8s.io/apimachinery/pkg/selection`` spells them.
OP_IN = "in"
OP_NOT_IN = "notin"
OP_EQUALS = "="
OP_DOUBLE_EQUALS = "=="
OP_NOT_EQUALS = "!="
OP_EXISTS = "exists"
OP_DOES_NOT_EXIST = "!"
OP_GT = "gt"
OP_LT = "lt"

_BINARY_OPERATORS = (OP_IN, OP_NOT_IN, OP_EQUALS, OP_DOUBLE_EQUALS, OP_NOT_EQUALS, OP_GT, OP_LT)
_VALID_OPERATORS = (*_BINARY_OPERATORS, OP_EXISTS, OP_DOES_NOT_EXIST)


class LabelSelectorError(ValueError):
    """A selector that does not parse or validate; ``str()`` is the Go error text."""


# --- validation messages (k8s.io/apimachinery/pkg/util/validation) -------------------------

_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME_RE = re.compile(f"^{_NAME_FMT}$")
_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
_VALUE_FMT = f"({_NAME_FMT})?"
_VALUE_RE = re.compile(f"^{_VALUE_FMT}$")
_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_SUBDOMAIN_RE = re.compile(f"^{_SUBDOMAIN_FMT}$")
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def qualified_name_errors(value: str) -> list[str]:
    """``validation.IsQualifiedName``: the checks every label key passes."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errs.append("prefix part " + _max_len_error(253))
            if not _SUBDOMAIN_RE.match(prefix):
                errs.append("prefix part " + _regex_error(_SUBDOMAIN_MSG, _SUBDOMAIN_FMT, "example.com"))
    else:
        return [
            "a qualified name "
            + _regex_error(_NAME_MSG, _NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + _max_len_error(63))
    if not _NAME_RE.match(name):
        errs.append("name part " + _regex_error(_NAME_MSG, _NAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


def label_value_errors(value: str) -> list[str]:
    """``validation.IsValidLabelValue``."""
    errs: list[str] = []
    if len(value) > 63:
        errs.append(_max_len_error(63))
    if not _VALUE_RE.match(value):
        errs.append(_regex_error(_VALUE_MSG, _VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def _go_value(value: Any) -> str:
    """How ``field.Invalid`` renders a bad value (``%q`` for strings, ``%#v`` for string slices)."""
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, (list, tuple)):
        return string_slice(value)
    return str(value)


def _invalid(path: str, value: Any, detail: str) -> str:
    return f"{path}: Invalid value: {_go_value(value)}: {detail}"


def _aggregate(errors: Sequence[str]) -> str:
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"


_INT64_RE = re.compile(r"^[+-]?[0-9]+$")


def _parse_int64(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)`` or None."""
    if not _INT64_RE.match(text):
        return None
    number = int(text)
    if not -(2**63) <= number < 2**63:
        return None
    return number


# --- requirements -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``key op values`` term; build with :func:`new_requirement` to validate."""

    key: str
    operator: str
    values: tuple[str, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in (OP_IN, OP_EQUALS, OP_DOUBLE_EQUALS):
            value = labels.get(self.key)
            return value is not None and value in self.values
        if op in (OP_NOT_IN, OP_NOT_EQUALS):
            value = labels.get(self.key)
            return value is None or value not in self.values
        if op == OP_EXISTS:
            return self.key in labels
        if op == OP_DOES_NOT_EXIST:
            return self.key not in labels
        if op in (OP_GT, OP_LT):
            value = labels.get(self.key)
            if value is None or len(self.values) != 1:
                return False
            have = _parse_int64(value)
            want = _parse_int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == OP_GT else have < want
        return False

    def __str__(self) -> str:
        op = self.operator
        if op == OP_EXISTS:
            return self.key
        if op == OP_DOES_NOT_EXIST:
            return "!" + self.key
        symbol = {OP_EQUALS: "=", OP_DOUBLE_EQUALS: "==", OP_NOT_EQUALS: "!=", OP_IN: " in ",
                  OP_NOT_IN: " notin ", OP_GT: ">", OP_LT: "<"}[op]
        values = self.values[0] if len(self.values) == 1 else ",".join(sorted(self.values))
        if op in (OP_IN, OP_NOT_IN):
            return f"{self.key}{symbol}({values})"
        return f"{self.key}{symbol}{values}"


def _requirement_errors(key: str, op: str, values: Sequence[str], path: str) -> list[str]:
    """``labels.NewRequirement`` validation, with field paths under ``path`` ("" for none)."""

    def child(name: str) -> str:
        return f"{path}.{name}" if path else name

    errors: list[str] = []
    key_errors = qualified_name_errors(key)
    if key_errors:
        errors.append(_invalid(child("key"), key, "; ".join(key_errors)))
    value_path = child("values")
    if op in (OP_IN, OP_NOT_IN):
        if not values:
            errors.append(_invalid(value_path, list(values),
                                   "for 'in', 'notin' operators, values set can't be empty"))
    elif op in (OP_EQUALS, OP_DOUBLE_EQUALS, OP_NOT_EQUALS):
        if len(values) != 1:
            errors.append(_invalid(value_path, list(values),
                                   "exact-match compatibility requires one single value"))
    elif op in (OP_EXISTS, OP_DOES_NOT_EXIST):
        if values:
            errors.append(_invalid(value_path, list(values),
                                   "values set must be empty for exists and does not exist"))
    elif op in (OP_GT, OP_LT):
        if len(values) != 1:
            errors.append(_invalid(value_path, list(values),
                                   "for 'Gt', 'Lt' operators, exactly one value is required"))
        for i, value in enumerate(values):
            if _parse_int64(value) is None:
                errors.append(_invalid(f"{value_path}[{i}]", value,
                                       "for 'Gt', 'Lt' operators, the value must be an integer"))
    else:
        supported = ", ".join(go_quote(o) for o in _VALID_OPERATORS)
        errors.append(f"{child('operator')}: Unsupported value: {go_quote(op)}: "
                      f"supported values: {supported}")
    for i, value in enumerate(values):
        value_errors = label_value_errors(value)
        if value_errors:
            errors.append(_invalid(f"{value_path}[{i}][{key}]", value, "; ".join(value_errors)))
    return errors


def new_requirement(key: str, operator: str, values: Iterable[str] = ()) -> Requirement:
    """Validate and build a requirement, raising :class:`LabelSelectorError` like ``NewRequirement``."""
    vals = tuple(values)
    errors = _requirement_errors(key, operator, vals, "")
    if errors:
        raise LabelSelectorError(_aggregate(errors))
    return Requirement(key, operator, vals)


# --- selector -----------------------------------------------------------------------------


class LabelSelector:
    """An AND of requirements, sorted by key as the Go parser leaves them."""

    __slots__ = ("_nothing", "requirements")

    def __init__(self, requirements: Iterable[Requirement] = (), *, nothing: bool = False) -> None:
        self.requirements: tuple[Requirement, ...] = tuple(sorted(requirements, key=lambda r: r.key))
        self._nothing = nothing

    @classmethod
    def everything(cls) -> LabelSelector:
        return cls()

    @classmethod
    def nothing(cls) -> LabelSelector:
        """The selector a nil ``metav1.LabelSelector`` converts to: matches no object."""
        return cls(nothing=True)

    @property
    def empty(self) -> bool:
        """True when the selector selects everything."""
        return not self._nothing and not self.requirements

    @property
    def matches_nothing(self) -> bool:
        return self._nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self._nothing:
            return False
        if not self.requirements:
            return True
        have: Mapping[str, str] = labels if labels is not None else {}
        for requirement in self.requirements:
            if not requirement.matches(have):
                return False
        return True

    def requires_exact_match(self, key: str) -> str | None:
        """The single value ``key`` must have, if the selector pins one (``RequiresExactMatch``)."""
        for requirement in self.requirements:
            if requirement.key == key:
                pinned = requirement.operator in (OP_EQUALS, OP_DOUBLE_EQUALS, OP_IN)
                if pinned and len(requirement.values) == 1:
                    return requirement.values[0]
                return None
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self) -> str:
        return f"LabelSelector({str(self)!r})" if not self._nothing else "LabelSelector.nothing()"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, LabelSelector) and self.requirements == other.requirements
                and self._nothing == other._nothing)

    def __hash__(self) -> int:
        return hash((self.requirements, self._nothing))


# --- lexer / parser (labels.Lexer, labels.Parser) ------------------------------------------

_T_ERROR, _T_EOS, _T_CLOSE, _T_COMMA, _T_NOT, _T_DEQ, _T_EQ, _T_GT = range(8)
_T_ID, _T_IN, _T_LT, _T_NEQ, _T_NOTIN, _T_OPEN = range(8, 14)

_STRING_TO_TOKEN = {
    ")": _T_CLOSE, ",": _T_COMMA, "!": _T_NOT, "==": _T_DEQ, "=": _T_EQ, ">": _T_GT,
    "in": _T_IN, "<": _T_LT, "!=": _T_NEQ, "notin": _T_NOTIN, "(": _T_OPEN,
}
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")


def _lex(text: str) -> list[tuple[int, str]]:
    items: list[tuple[int, str]] = []
    pos, end = 0, len(text)
    while True:
        while pos < end and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= end:
            items.append((_T_EOS, ""))
            return items
        ch = text[pos]
        if ch in _SPECIAL:
            buffer = ""
            last: tuple[int, str] | None = None
            while pos < end and text[pos] in _SPECIAL:
                buffer += text[pos]
                pos += 1
                token = _STRING_TO_TOKEN.get(buffer)
                if token is not None:
                    last = (token, buffer)
                elif last is not None:
                    pos -= 1
                    break
            if last is None:
                items.append((_T_ERROR, f"error expected: keyword found '{buffer}'"))
            else:
                items.append(last)
        else:
            start = pos
            while pos < end and text[pos] not in _SPECIAL and text[pos] not in _WHITESPACE:
                pos += 1
            word = text[start:pos]
            items.append((_STRING_TO_TOKEN.get(word, _T_ID), word))


class _Parser:
    __slots__ = ("items", "position")

    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.position = 0

    def _peek(self, values_context: bool) -> tuple[int, str]:
        token, literal = self.items[self.position]
        if values_context and token in (_T_IN, _T_NOTIN):
            token = _T_ID
        return token, literal

    def _take(self, values_context: bool) -> tuple[int, str]:
        item = self._peek(values_context)
        self.position += 1
        return item

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            token, literal = self._peek(True)
            if token in (_T_ID, _T_NOT):
                try:
                    requirements.append(self._requirement())
                except LabelSelectorError as err:
                    raise LabelSelectorError(f"unable to parse requirement: {err}") from None
                token, literal = self._take(True)
                if token == _T_EOS:
                    return requirements
                if token == _T_COMMA:
                    next_token, next_literal = self._peek(True)
                    if next_token not in (_T_ID, _T_NOT):
                        raise LabelSelectorError(f"found '{next_literal}', expected: identifier after ','")
                else:
                    raise LabelSelectorError(f"found '{literal}', expected: ',' or 'end of string'")
            elif token == _T_EOS:
                return requirements
            else:
                raise LabelSelectorError(f"found '{literal}', expected: !, identifier, or 'end of string'")

    def _requirement(self) -> Requirement:
        operator = ""
        token, literal = self._take(True)
        if token == _T_NOT:
            operator = OP_DOES_NOT_EXIST
            token, literal = self._take(True)
        if token != _T_ID:
            raise LabelSelectorError(f"found '{literal}', expected: identifier")
        key = literal
        key_errors = qualified_name_errors(key)
        if key_errors:
            raise LabelSelectorError(_invalid("<nil>", key, "; ".join(key_errors)))
        if self._peek(True)[0] in (_T_EOS, _T_COMMA) and operator != OP_DOES_NOT_EXIST:
            operator = OP_EXISTS
        if operator in (OP_EXISTS, OP_DOES_NOT_EXIST):
            return new_requirement(key, operator, ())
        operator = self._operator()
        values = self._values() if operator in (OP_IN, OP_NOT_IN) else self._exact_value()
        return new_requirement(key, operator, sorted(values))

    def _operator(self) -> str:
        token, literal = self._take(False)
        operator = {_T_IN: OP_IN, _T_EQ: OP_EQUALS, _T_DEQ: OP_DOUBLE_EQUALS, _T_GT: OP_GT,
                    _T_LT: OP_LT, _T_NOTIN: OP_NOT_IN, _T_NEQ: OP_NOT_EQUALS}.get(token)
        if operator is None:
            raise LabelSelectorError(f"found '{literal}', expected: {', '.join(_BINARY_OPERATORS)}")
        return operator

    def _values(self) -> set[str]:
        token, literal = self._take(True)
        if token != _T_OPEN:
            raise LabelSelectorError(f"found '{literal}' expected: '('")
        token, literal = self._peek(True)
        if token in (_T_ID, _T_COMMA):
            values = self._identifier_list()
            if self._take(True)[0] != _T_CLOSE:
                raise LabelSelectorError(f"found '{literal}', expected: ')'")
            return values
        if token == _T_CLOSE:
            self._take(True)
            return {""}
        raise LabelSelectorError(f"found '{literal}', expected: ',', ')' or identifier")

    def _identifier_list(self) -> set[str]:
        values: set[str] = set()
        while True:
            token, literal = self._take(True)
            if token == _T_ID:
                values.add(literal)
                next_token, next_literal = self._peek(True)
                if next_token == _T_COMMA:
                    continue
                if next_token == _T_CLOSE:
                    return values
                raise LabelSelectorError(f"found '{next_literal}', expected: ',' or ')'")
            if token == _T_COMMA:
                if not values:
                    values.add("")
                next_token = self._peek(True)[0]
                if next_token == _T_CLOSE:
                    values.add("")
                    return values
                if next_token == _T_COMMA:
                    values.add("")
                continue
            raise LabelSelectorError(f"found '{literal}', expected: ',', or identifier")

    def _exact_value(self) -> set[str]:
        token = self._peek(True)[0]
        if token in (_T_EOS, _T_COMMA):
            return {""}
        token, literal = self._take(True)
        if token == _T_ID:
            return {literal}
        raise LabelSelectorError(f"found '{literal}', expected: identifier")


def parse_label_selector(text: str) -> LabelSelector:
    """Parse the ``labelSelector`` query syntax (``labels.Parse``)."""
    if not text or text.isspace():
        return LabelSelector()
    return LabelSelector(_Parser(text).parse())


def selector_from_set(labels: Mapping[str, str] | None) -> LabelSelector:
    """Exact-match selector for a label map, unvalidated (``labels.SelectorFromSet``)."""
    if not labels:
        return LabelSelector()
    return LabelSelector(Requirement(k, OP_EQUALS, (v,)) for k, v in labels.items())


_EXPRESSION_OPERATORS = {"In": OP_IN, "NotIn": OP_NOT_IN, "Exists": OP_EXISTS,
                         "DoesNotExist": OP_DOES_NOT_EXIST}


def from_label_selector_object(obj: Mapping[str, Any] | None) -> LabelSelector:
    """Convert a ``metav1.LabelSelector`` (``LabelSelectorAsSelector``).

    ``None`` selects nothing; ``{}`` selects everything.
    """
    if obj is None:
        return LabelSelector.nothing()
    match_labels: Mapping[str, str] = obj.get("matchLabels") or {}
    expressions: Sequence[Mapping[str, Any]] = obj.get("matchExpressions") or []
    if not match_labels and not expressions:
        return LabelSelector()
    requirements: list[Requirement] = []
    for key in sorted(match_labels):
        requirements.append(new_requirement(key, OP_EQUALS, (match_labels[key],)))
    for expression in expressions:
        operator_name = expression.get("operator", "")
        operator = _EXPRESSION_OPERATORS.get(operator_name)
        if operator is None:
            raise LabelSelectorError(f"{go_quote(str(operator_name))} is not a valid pod selector operator")
        requirements.append(new_requirement(expression.get("key", ""), operator,
                                            expression.get("values") or ()))
    return LabelSelector(requirements)


def format_labels(labels: Mapping[str, str] | None) -> str:
    """``labels.FormatLabels``: sorted ``k=v`` pairs, ``<none>`` when there are none."""
    if not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def format_label_selector_object(obj: Mapping[str, Any] | None) -> str:
    """``metav1.FormatLabelSelector``: ``<error>`` if invalid, ``<none>`` if empty."""
    try:
        text = str(from_label_selector_object(obj))
    except LabelSelectorError:
        return "<error>"
    return text or "<none>"
