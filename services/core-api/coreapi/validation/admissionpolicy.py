"""kube's validation of ValidatingAdmissionPolicy and its binding (admissionregistration/validation).

A policy is refused when it could never run: no failurePolicy or matchConstraints (defaulting
fills them, so only explicit nulls hit this), no resourceRules, bad rules (operations, groups,
versions, ``resource/subresource`` wildcards, scope), a bad paramKind, bad selectors, neither
validations nor auditAnnotations, a CEL expression that does not compile (``compilation failed:
ERROR: <input>:1:5: ...``, cel-go's text) or names something the admission environment does not
declare (``params`` without a paramKind, ``variables`` without variables, ``authorizer`` in a
messageExpression), a variable name that is not a CEL identifier, an audit annotation key that
is not a qualified name after ``<policy>/``. A binding needs a policyName, valid validation
actions (not Deny with Warn) and a paramRef with one of name or selector and a
parameterNotFoundAction. Result-type checks need cel-go's checker, which the interpreter lacks:
an expression that is not a bool is found when it runs (it denies, or errors into failurePolicy).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from genericapi.apimachinery import errors
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.validation_meta import (
    name_is_dns_subdomain,
    name_is_path_segment,
    validate_dns1035_label,
    validate_dns1123_subdomain,
    validate_qualified_name,
)

from .selectors import validate_label_selector

FAILURE_POLICIES = ["Fail", "Ignore"]
MATCH_POLICIES = ["Equivalent", "Exact"]
OPERATIONS = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"]
SCOPES = ["*", "Cluster", "Namespaced"]
REASONS = ["Forbidden", "Invalid", "RequestEntityTooLarge", "Unauthorized"]
ACTIONS = ["Audit", "Deny", "Warn"]
MAX_AUDIT_ANNOTATIONS = 20
MAX_VALUE_EXPRESSION = 5 * 1024
_CEL_IDENT = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")
_CEL_RESERVED = frozenset({"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
                           "function", "if", "import", "let", "loop", "package", "namespace", "return", "var",
                           "void", "while"})
_NEWLINES = re.compile(r"[\n\r]+")


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _strings(value: Any) -> list[str]:
    return [str(v) for v in _list(value)]


# -- rules ----------------------------------------------------------------------------------------------
def _resources(resources: list[str], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if not resources:
        errs.append(errors.required(path))
    with_wild_sub: set[str] = set()
    sub_with_wild_res: set[str] = set()
    double = single = plain = False
    for i, res_sub in enumerate(resources):
        if res_sub == "":
            errs.append(errors.required(f"{path}[{i}]"))
            continue
        double = double or res_sub == "*/*"
        single = single or res_sub == "*"
        if "/" not in res_sub:
            plain = res_sub != "*"
            continue
        res, sub = res_sub.split("/", 1)
        if res in with_wild_sub:
            errs.append(errors.invalid(f"{path}[{i}]", res_sub, f"if '{res}/*' is present, must not specify {res_sub}"))
        if sub in sub_with_wild_res:
            errs.append(errors.invalid(f"{path}[{i}]", res_sub, f"if '*/{sub}' is present, must not specify {res_sub}"))
        if sub == "*":
            with_wild_sub.add(res)
        if res == "*":
            sub_with_wild_res.add(sub)
    if len(resources) > 1 and double:
        errs.append(errors.invalid(path, resources, "if '*/*' is present, must not specify other resources"))
    if single and plain:
        errs.append(errors.invalid(path, resources,
                                   "if '*' is present, must not specify other resources without subresources"))
    return errs


def _rule(rule: dict[str, Any], path: str) -> list[FieldError]:
    """``validateRuleWithOperations`` plus ``resourceNames`` (a NamedRuleWithOperations)."""
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, name in enumerate(_strings(rule.get("resourceNames"))):
        errs.extend(errors.invalid(f"{path}.resourceNames[{i}]", name, m) for m in name_is_path_segment(name, False))
        if name in names:
            errs.append(errors.duplicate(f"{path}.resourceNames[{i}]", name))
        names.add(name)
    ops = _strings(rule.get("operations"))
    if not ops:
        errs.append(errors.required(f"{path}.operations"))
    if len(ops) > 1 and "*" in ops:
        errs.append(errors.invalid(f"{path}.operations", ops, "if '*' is present, must not specify other operations"))
    errs.extend(errors.not_supported(f"{path}.operations[{i}]", op, OPERATIONS)
                for i, op in enumerate(ops) if op not in OPERATIONS)
    groups = _strings(rule.get("apiGroups"))
    if not groups:
        errs.append(errors.required(f"{path}.apiGroups"))
    if len(groups) > 1 and "*" in groups:
        errs.append(errors.invalid(f"{path}.apiGroups", groups, "if '*' is present, must not specify other API groups"))
    versions = _strings(rule.get("apiVersions"))
    if not versions:
        errs.append(errors.required(f"{path}.apiVersions"))
    if len(versions) > 1 and "*" in versions:
        errs.append(errors.invalid(f"{path}.apiVersions", versions,
                                   "if '*' is present, must not specify other API versions"))
    errs.extend(errors.required(f"{path}.apiVersions[{i}]") for i, v in enumerate(versions) if v == "")
    errs.extend(_resources(_strings(rule.get("resources")), f"{path}.resources"))
    scope = rule.get("scope")
    if scope is not None and scope not in SCOPES:
        errs.append(errors.not_supported(f"{path}.scope", scope, SCOPES))
    return errs


def _match_resources(mr: Any, path: str) -> list[FieldError]:
    if not isinstance(mr, dict):
        return []
    errs: list[FieldError] = []
    policy = mr.get("matchPolicy")
    if policy is None:
        errs.append(errors.required(f"{path}.matchPolicy"))
    elif policy not in MATCH_POLICIES:
        errs.append(errors.not_supported(f"{path}.matchPolicy", policy, MATCH_POLICIES))
    for key in ("namespaceSelector", "objectSelector"):
        if mr.get(key) is None:
            errs.append(errors.required(f"{path}.{key}"))
        else:
            errs.extend(validate_label_selector(mr.get(key), f"{path}.{key}"))
    for key in ("resourceRules", "excludeResourceRules"):
        for i, rule in enumerate(_list(mr.get(key))):
            if isinstance(rule, dict):
                errs.extend(_rule(rule, f"{path}.{key}[{i}]"))
    return errs


# -- CEL ---------------------------------------------------------------------------------------------------
@functools.cache
def _functions() -> frozenset[str]:
    """CEL's library and the authorizer's functions; CEL loads with the first policy validated, not at
    start-up (start-up CPU)."""
    from genericapi.apimachinery.cel.authz import FUNCTIONS as AUTHZ_FUNCTIONS
    from genericapi.apimachinery.cel.library import KNOWN_FUNCTIONS

    return frozenset(KNOWN_FUNCTIONS) | frozenset(AUTHZ_FUNCTIONS)


def _expression(src: str, path: str, declared: frozenset[str], value: str | None = None) -> list[FieldError]:
    """cel-go's compile errors for ``src`` in an environment declaring ``declared``."""
    from genericapi.apimachinery.cel.admission import compile_expression
    from genericapi.apimachinery.cel.checks import find_issues

    compiled = compile_expression(src)
    shown = src if value is None else value
    if compiled.program is None:
        return [errors.invalid(path, shown, f"compilation failed: {compiled.error}")]
    issues = find_issues(src, {}, _functions() | declared, frozenset(), False)
    if issues:
        return [errors.invalid(path, shown, "compilation failed: " + "\n".join(issues))]
    return []


def _declared(has_params: bool, has_authorizer: bool, has_variables: bool) -> frozenset[str]:
    names = {"object", "oldObject", "request", "namespaceObject"}
    if has_params:
        names.add("params")
    if has_authorizer:
        names.add("authorizer")
    if has_variables:
        names.add("variables")
    return frozenset(names)


def _match_conditions(conditions: list[Any], has_params: bool, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if len(conditions) > 64:
        errs.append(errors.too_many(path, len(conditions), 64))
    names: set[str] = set()
    declared = _declared(has_params, True, False)
    for i, c in enumerate(conditions):
        c = c if isinstance(c, dict) else {}
        expr = str(c.get("expression") or "")
        if not expr.strip():
            errs.append(errors.required(f"{path}[{i}].expression"))
        else:
            errs.extend(_expression(expr.strip(), f"{path}[{i}].expression", declared))
        name = str(c.get("name") or "")
        if not name:
            errs.append(errors.required(f"{path}[{i}].name"))
        else:
            errs.extend(errors.invalid(f"{path}[{i}].name", name, m) for m in validate_qualified_name(name))
            if name in names:
                errs.append(errors.duplicate(f"{path}[{i}].name", name))
            names.add(name)
    return errs


def _param_kind(pk: dict[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    api_version = str(pk.get("apiVersion") or "")
    if not api_version:
        errs.append(errors.required(f"{path}.apiVersion"))
    elif api_version.count("/") > 1:
        errs.append(errors.invalid(f"{path}.apiVersion", api_version,
                                   f"unexpected GroupVersion string: {api_version}"))
    elif api_version != "/":
        group, _, version = api_version.rpartition("/")
        if group:
            msgs = validate_dns1123_subdomain(group)
            if msgs:
                errs.append(errors.invalid(f"{path}.apiVersion", group, ",".join(msgs)))
        if not version:
            errs.append(errors.invalid(f"{path}.apiVersion", api_version, "version must be specified"))
        else:
            msgs = validate_dns1035_label(version)
            if msgs:
                errs.append(errors.invalid(f"{path}.apiVersion", version, ",".join(msgs)))
    kind = str(pk.get("kind") or "")
    if not kind:
        errs.append(errors.required(f"{path}.kind"))
    else:
        msgs = validate_dns1035_label(kind.lower())
        if msgs:
            errs.append(errors.invalid(f"{path}.kind", kind,
                                       "may have mixed case, but should otherwise match: " + ",".join(msgs)))
    return errs


def _validation(v: dict[str, Any], has_params: bool, has_variables: bool, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    expr = str(v.get("expression") or "")
    msg = str(v.get("message") or "")
    msg_expr = str(v.get("messageExpression") or "")
    if not expr.strip():
        errs.append(errors.required(f"{path}.expression", "expression is not specified"))
    else:
        errs.extend(_expression(expr, f"{path}.expression", _declared(has_params, True, has_variables)))
    if msg_expr and not msg_expr.strip():
        errs.append(errors.invalid(f"{path}.messageExpression", msg_expr, "must be non-empty if specified"))
    elif msg_expr.strip():
        errs.extend(_expression(msg_expr, f"{path}.messageExpression",
                                _declared(has_params, False, has_variables)))
    if msg and not msg.strip():
        errs.append(errors.invalid(f"{path}.message", msg, "message must be non-empty if specified"))
    elif _NEWLINES.search(msg.strip()):
        errs.append(errors.invalid(f"{path}.message", msg, "message must not contain line breaks"))
    reason = v.get("reason")
    if reason is not None and reason not in REASONS:
        errs.append(errors.not_supported(f"{path}.reason", reason, REASONS))
    return errs


def _variable(v: dict[str, Any], has_params: bool, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    name = str(v.get("name") or "")
    if not name.strip():
        errs.append(errors.required(f"{path}.name", "name is not specified"))
    elif not _CEL_IDENT.match(name) or name in _CEL_RESERVED:
        errs.append(errors.invalid(f"{path}.name", name, "name is not a valid CEL identifier"))
    expr = str(v.get("expression") or "")
    if not expr.strip():
        errs.append(errors.required(f"{path}.expression", "expression is not specified"))
    else:
        errs.extend(_expression(expr, f"{path}.expression", _declared(has_params, True, True)))
    return errs


def _audit_annotation(a: dict[str, Any], policy_name: str, has_params: bool, has_variables: bool,
                      path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    key = str(a.get("key") or "")
    if policy_name:
        errs.extend(errors.invalid(f"{path}.key", f"{policy_name}/{key}", m)
                    for m in validate_qualified_name(f"{policy_name}/{key}"))
    else:
        errs.append(errors.invalid(f"{path}.key", key, "requires metadata.name be non-empty"))
    value = str(a.get("valueExpression") or "")
    trimmed = value.strip()
    if not trimmed:
        errs.append(errors.required(f"{path}.valueExpression", "valueExpression is not specified"))
    elif len(trimmed) > MAX_VALUE_EXPRESSION:
        errs.append(errors.required(f"{path}.valueExpression",
                                    f"must not exceed {MAX_VALUE_EXPRESSION} bytes in length"))
    else:
        errs.extend(_expression(trimmed, f"{path}.valueExpression", _declared(has_params, True, has_variables),
                                value))
    return errs


# -- the two kinds -------------------------------------------------------------------------------------------
def validate_policy(obj: dict[str, Any]) -> list[FieldError]:
    """``ValidateValidatingAdmissionPolicy`` (object meta is checked by the strategy)."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    name = str((obj.get("metadata") or {}).get("name") or "")
    errs: list[FieldError] = []
    failure = spec.get("failurePolicy")
    if failure is None:
        errs.append(errors.required("spec.failurePolicy"))
    elif failure not in FAILURE_POLICIES:
        errs.append(errors.not_supported("spec.failurePolicy", failure, FAILURE_POLICIES))
    pk = spec.get("paramKind")
    has_params = isinstance(pk, dict)
    if isinstance(pk, dict):
        errs.extend(_param_kind(pk, "spec.paramKind"))
    mc = spec.get("matchConstraints")
    if mc is None:
        errs.append(errors.required("spec.matchConstraints"))
    else:
        errs.extend(_match_resources(mc, "spec.matchConstraints"))
        if not _list((mc or {}).get("resourceRules")):
            errs.append(errors.required("spec.matchConstraints.resourceRules"))
    errs.extend(_match_conditions(_list(spec.get("matchConditions")), has_params, "spec.matchConditions"))
    variables = _list(spec.get("variables"))
    for i, v in enumerate(variables):
        errs.extend(_variable(v if isinstance(v, dict) else {}, has_params, f"spec.variables[{i}]"))
    validations = _list(spec.get("validations"))
    audit = _list(spec.get("auditAnnotations"))
    if not validations and not audit:
        msg = "validations or auditAnnotations must contain at least one item"
        errs.append(errors.required("spec.validations", msg))
        errs.append(errors.required("spec.auditAnnotations", msg))
        return errs
    for i, v in enumerate(validations):
        errs.extend(_validation(v if isinstance(v, dict) else {}, has_params, bool(variables),
                                f"spec.validations[{i}]"))
    if len(audit) > MAX_AUDIT_ANNOTATIONS:
        errs.append(errors.invalid("spec.auditAnnotations", audit,
                                   f"must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations"))
    keys: set[str] = set()
    for i, a in enumerate(audit):
        a = a if isinstance(a, dict) else {}
        errs.extend(_audit_annotation(a, name, has_params, bool(variables), f"spec.auditAnnotations[{i}]"))
        key = str(a.get("key") or "")
        if key in keys:
            errs.append(errors.duplicate(f"spec.auditAnnotations[{i}].key", key))
        keys.add(key)
    return errs


def _param_ref(ref: Any, path: str) -> list[FieldError]:
    if not isinstance(ref, dict):
        return []
    errs: list[FieldError] = []
    name = str(ref.get("name") or "")
    selector = ref.get("selector")
    if name:
        errs.extend(errors.invalid(f"{path}.name", name, m) for m in name_is_path_segment(name, False))
        if selector is not None:
            errs.append(errors.forbidden(f"{path}.name", "name and selector are mutually exclusive"))
    if selector is not None:
        errs.extend(validate_label_selector(selector, f"{path}.selector"))
        if name:
            errs.append(errors.forbidden(f"{path}.selector", "name and selector are mutually exclusive"))
    if not name and selector is None:
        errs.append(errors.required(path, "one of name or selector must be specified"))
    action = ref.get("parameterNotFoundAction")
    if not action:
        errs.append(errors.required(f"{path}.parameterNotFoundAction"))
    elif action not in ("Deny", "Allow"):
        errs.append(errors.not_supported(f"{path}.parameterNotFoundAction", action, ["Deny", "Allow"]))
    return errs


def _actions(actions: list[Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, action in enumerate(actions):
        if action not in ACTIONS:
            errs.append(errors.not_supported(f"{path}[{i}]", action, ACTIONS))
        if action in seen:
            errs.append(errors.duplicate(f"{path}[{i}]", action))
        seen.add(str(action))
    if "Deny" in seen and "Warn" in seen:
        errs.append(errors.invalid(path, actions, "must not contain both Deny and Warn (repeating the same "
                                   "validation failure information in the API response and headers serves no purpose)"))
    if not seen:
        errs.append(errors.required(path, "at least one validation action is required"))
    return errs


def validate_binding(obj: dict[str, Any]) -> list[FieldError]:
    """``ValidateValidatingAdmissionPolicyBinding`` (object meta is checked by the strategy)."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    errs: list[FieldError] = []
    policy = str(spec.get("policyName") or "")
    if not policy:
        errs.append(errors.required("spec.policyName"))
    else:
        errs.extend(errors.invalid("spec.policyName", policy, m) for m in name_is_dns_subdomain(policy, False))
    errs.extend(_param_ref(spec.get("paramRef"), "spec.paramRef"))
    errs.extend(_match_resources(spec.get("matchResources"), "spec.matchResources"))
    errs.extend(_actions(_list(spec.get("validationActions")), "spec.validationActions"))
    return errs
