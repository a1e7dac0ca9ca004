"""Compile a CRD schema's ``x-kubernetes-validations`` into a tree of rule programs, with kube's CRD errors.

Runs when a CRD is written (so a bad rule is rejected then, at the paths and with the texts of
``apiextensions/validation``: ``<path>.x-kubernetes-validations[i].rule: Invalid value:
apiextensions.ValidationRule{...}: compilation failed: ERROR: <input>:1:5: ...``) and when the
serving side builds a validator from a stored CRD. ``rule`` and ``messageExpression`` are parsed
by the interpreter (cel-go's syntax error texts), then checked for undeclared names and undefined
fields against the node's schema (``checks``), then for type errors and a result that is not a
bool (a messageExpression's: not a string) as far as ``typecheck`` can tell without a checker. A
rule naming ``oldSelf`` is a transition rule; it is refused under a list that is not
``x-kubernetes-list-type: map`` (items there cannot be correlated with the old object).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from genericapi.apimachinery.cel import checks, typecheck
from genericapi.apimachinery.cel.binding import celrust
from genericapi.apimachinery.cel.fieldpath import FieldPathError, valid_field_path
from genericapi.apimachinery.cel.library import KNOWN_FUNCTIONS
from genericapi.apimachinery.errors import FieldError, GoRendered, invalid, not_supported, required
from genericapi.apimachinery.gofmt import json_quote

SUPPORTED_REASONS = ("FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired")
_NEWLINES = re.compile(r"[\n\r]+")
_VARS = frozenset({"self", "oldSelf"})


@dataclass
class CompiledRule:
    """One rule ready to run: its program, optional message program, and how errors are reported."""

    rule: str
    message: str
    program: Any
    message_program: Any | None
    message_expression: str
    uses_old_self: bool
    optional_old_self: bool
    reason: str | None
    field_path: str  # kube's field.Path text of fieldPath ("spec.x"), "" when unset


@dataclass
class RuleNode:
    """A schema node on the way to rules: its own rules and the children that hold rules."""

    schema: dict[str, Any]
    type: str
    rules: list[CompiledRule] = field(default_factory=list)
    properties: dict[str, RuleNode] = field(default_factory=dict)
    additional: RuleNode | None = None
    items: RuleNode | None = None


def render_rule(rule: dict[str, Any]) -> GoRendered:
    """The rule as Go's ``%#v`` prints ``apiextensions.ValidationRule`` (pointer fields print an address)."""
    reason = ("(*apiextensions.FieldValueErrorReason)(nil)" if rule.get("reason") is None
              else "(*apiextensions.FieldValueErrorReason)(0xc000000000)")
    optional = "(*bool)(nil)" if rule.get("optionalOldSelf") is None else "(*bool)(0xc000000000)"
    return GoRendered(
        f"apiextensions.ValidationRule{{Rule:{json_quote(str(rule.get('rule') or ''))}, "
        f"Message:{json_quote(str(rule.get('message') or ''))}, "
        f"MessageExpression:{json_quote(str(rule.get('messageExpression') or ''))}, Reason:{reason}, "
        f"FieldPath:{json_quote(str(rule.get('fieldPath') or ''))}, OptionalOldSelf:{optional}}}")


def _syntax_error(src: str) -> str | None:
    """cel-go's issue text for a rule that does not parse, else None."""
    try:
        celrust.compile(src)
    except Exception as e:  # the binding raises ValueError, sometimes RuntimeError
        text = str(e)
        start = text.find("ERROR: ")
        text = text[start:] if start >= 0 else text
        return text.replace("\n| ", "\n | ")
    return None


def _uses(src: str, name: str) -> bool:
    try:
        return name in celrust.compile(src).variables()
    except Exception:
        return False


def _schema_problems(rule: dict[str, Any], base: str, schema: dict[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    text, msg = str(rule.get("rule") or ""), str(rule.get("message") or "")
    msg_expr, fpath = str(rule.get("messageExpression") or ""), str(rule.get("fieldPath") or "")
    if not text.strip():
        errs.append(required(f"{base}.rule", "rule is not specified"))
    elif msg and not msg.strip():
        errs.append(invalid(f"{base}.message", msg, "message must be non-empty if specified"))
    elif len(msg) > 2048:
        errs.append(invalid(f"{base}.message", msg[:10] + "...",
                            "message must have a maximum length of 2048 characters"))
    elif _NEWLINES.search(msg.strip()):
        errs.append(invalid(f"{base}.message", msg, "message must not contain line breaks"))
    elif _NEWLINES.search(text.strip()) and not msg.strip():
        errs.append(required(f"{base}.message", "message must be specified if rule contains line breaks"))
    if msg_expr and not msg_expr.strip():
        errs.append(required(f"{base}.messageExpression", "messageExpression must be non-empty if specified"))
    reason = rule.get("reason")
    if reason is not None and reason not in SUPPORTED_REASONS:
        errs.append(not_supported(f"{base}.reason", reason, SUPPORTED_REASONS))
    if fpath and not fpath.strip():
        errs.append(invalid(f"{base}.fieldPath", fpath, "fieldPath must be non-empty if specified"))
    if _NEWLINES.search(fpath):
        errs.append(invalid(f"{base}.fieldPath", fpath, "fieldPath must not contain line breaks"))
    if fpath:
        try:
            valid_field_path(fpath, schema)
        except FieldPathError as e:
            errs.append(invalid(f"{base}.fieldPath", fpath, f"fieldPath must be a valid path: {e}"))
    return errs


def _type_problems(src: str, schema: dict[str, Any], resource_root: bool,
                   want: type) -> tuple[str | None, str | None]:
    """(overload issues, result-type problem) found by ``typecheck``; (None, None) when none is seen."""
    found = typecheck.equality_issues(src, schema, resource_root)
    if found:
        return "\n".join(found), None
    sampled = typecheck.sample_problem(src, schema, resource_root, want)
    if sampled is None:
        return None, None
    kind, text = sampled
    return (text, None) if kind == "overload" else (None, kind)


def _compile_rule(rule: dict[str, Any], base: str, schema: dict[str, Any], resource_root: bool,
                  uncorrelatable: str | None) -> tuple[CompiledRule | None, list[FieldError]]:
    errs: list[FieldError] = []
    text = str(rule.get("rule") or "")
    msg_expr = str(rule.get("messageExpression") or "")
    problem = _syntax_error(text)
    if problem is None:
        found = checks.find_issues(text, schema, KNOWN_FUNCTIONS, _VARS, resource_root)
        problem = "\n".join(found) if found else None
    result_problem = None
    if problem is None:
        problem, result_problem = _type_problems(text, schema, resource_root, bool)
    if problem is not None:
        errs.append(invalid(f"{base}.rule", render_rule(rule), f"compilation failed: {problem}"))
    elif result_problem is not None:
        errs.append(invalid(f"{base}.rule", render_rule(rule), typecheck.NOT_BOOL))
    msg_problem = None
    if msg_expr.strip():
        msg_problem = _syntax_error(msg_expr)
        if msg_problem is None:
            found = checks.find_issues(msg_expr, schema, KNOWN_FUNCTIONS, _VARS, resource_root)
            msg_problem = "\n".join(found) if found else None
        msg_result = None
        if msg_problem is None and not errs:
            msg_problem, msg_result = _type_problems(msg_expr, schema, resource_root, str)
        if msg_problem is not None:
            errs.append(invalid(f"{base}.messageExpression", render_rule(rule),
                                f"messageExpression compilation failed: {msg_problem}"))
        elif msg_result is not None:
            errs.append(invalid(f"{base}.messageExpression", render_rule(rule), typecheck.NOT_STRING))
    uses_old = problem is None and _uses(text, "oldSelf")
    if uses_old and uncorrelatable is not None:
        errs.append(invalid(f"{base}.rule", text, "oldSelf cannot be used on the uncorrelatable portion of the "
                                                  f"schema within {uncorrelatable}"))
    if errs:
        return None, errs
    fpath = str(rule.get("fieldPath") or "")
    return CompiledRule(
        rule=text, message=str(rule.get("message") or ""), program=celrust.compile(text),
        message_program=celrust.compile(msg_expr) if msg_expr.strip() else None, message_expression=msg_expr,
        uses_old_self=uses_old, optional_old_self=bool(rule.get("optionalOldSelf")), reason=rule.get("reason"),
        field_path=valid_field_path(fpath, schema) if fpath else "",
    ), []


def has_rules(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    if schema.get("x-kubernetes-validations"):
        return True
    children = [*(schema.get("properties") or {}).values(), schema.get("items"), schema.get("additionalProperties")]
    return any(has_rules(c) for c in children)


def compile_node(schema: dict[str, Any], path: str, resource_root: bool, uncorrelatable: str | None,
                 errs: list[FieldError]) -> RuleNode | None:
    """Compile ``schema`` and below (``path`` is its CRD path); None when nothing below has rules."""
    if not has_rules(schema):
        return None
    node = RuleNode(schema=schema, type=str(schema.get("type") or ""))
    rules = schema.get("x-kubernetes-validations") or []
    local: list[FieldError] = []
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        local.extend(_schema_problems(rule if isinstance(rule, dict) else {}, f"{path}.x-kubernetes-validations[{i}]",
                                      schema))
    if not local:
        for i, rule in enumerate(rules if isinstance(rules, list) else []):
            compiled, rule_errs = _compile_rule(rule, f"{path}.x-kubernetes-validations[{i}]", schema, resource_root,
                                                uncorrelatable)
            local.extend(rule_errs)
            if compiled is not None:
                node.rules.append(compiled)
    errs.extend(local)
    for name, prop in (schema.get("properties") or {}).items():
        if isinstance(prop, dict):
            child = compile_node(prop, f"{path}.properties[{name}]", bool(prop.get("x-kubernetes-embedded-resource")),
                                 uncorrelatable, errs)
            if child is not None:
                node.properties[name] = child
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        node.additional = compile_node(extra, f"{path}.additionalProperties",
                                       bool(extra.get("x-kubernetes-embedded-resource")), uncorrelatable, errs)
    items = schema.get("items")
    if isinstance(items, dict):
        items_path = f"{path}.items"
        if uncorrelatable is None and schema.get("x-kubernetes-list-type") != "map":
            uncorrelatable = items_path
        node.items = compile_node(items, items_path, bool(items.get("x-kubernetes-embedded-resource")),
                                  uncorrelatable, errs)
    return node
