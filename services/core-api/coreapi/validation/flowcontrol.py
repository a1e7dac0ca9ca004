"""FlowSchemas and PriorityLevelConfigurations (``flowcontrol.apiserver.k8s.io/v1``): kube 1.33's
validation (pkg/apis/flowcontrol/validation) with its field paths and messages.

Beyond the shape: matching precedence 1..10000 (1 only for ``exempt``), a referenced level name,
subjects of one kind each, verbs from kube's list or ``*`` alone, non-resource URLs that start with
``/`` and glob only as a ``/*`` suffix, namespaces as DNS labels, queuing within shuffle sharding's
entropy, percentages in range, and the mandatory objects' specs fixed (the ``exempt`` level's
``spec.exempt`` stays editable).
"""

from __future__ import annotations

import copy
from typing import Any

from genericapi.apimachinery import errors
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.flowcontrol import bootstrap
from genericapi.apimachinery.flowcontrol.shufflesharding import MAX_HASH_BITS, required_entropy_bits
from genericapi.apimachinery.gofmt import GoRendered, go_quote, string_slice
from genericapi.apimachinery.validation_meta import validate_dns1123_label, validate_dns1123_subdomain

Obj = dict[str, Any]

MAX_MATCHING_PRECEDENCE = 10000
MAX_QUEUES = 10 * 1000 * 1000
_DISTINGUISHERS = ("ByNamespace", "ByUser")
_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch")
_SUBJECT_KINDS = ("Group", "ServiceAccount", "User")
_PL_TYPES = ("Exempt", "Limited")
_LIMIT_RESPONSES = ("Queue", "Reject")
_NS_INTRO = "each member of this list must be '*' or a DNS-1123 label; "


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def validate_flow_schema(fs: Obj) -> list[FieldError]:
    spec = fs.get("spec") or {}
    errs = validate_flow_schema_spec(_name(fs), spec)
    fixed = bootstrap.mandatory("FlowSchema").get(_name(fs))
    if fixed is not None and _normal_fs_spec(spec) != _normal_fs_spec(fixed["spec"]):
        errs.append(errors.invalid("spec", GoRendered("flowcontrol.FlowSchemaSpec{...}"),
                                   f"spec of '{_name(fs)}' must equal the fixed value"))
    return errs + _validate_conditions((fs.get("status") or {}).get("conditions"))


def validate_flow_schema_update(new: Obj, _old: Obj) -> list[FieldError]:
    return validate_flow_schema(new)


def validate_flow_schema_spec(name: str, spec: Obj) -> list[FieldError]:
    errs: list[FieldError] = []
    precedence = spec.get("matchingPrecedence") or 0
    if isinstance(precedence, int):
        if precedence <= 0:
            errs.append(errors.invalid("spec.matchingPrecedence", precedence, "must be a positive value"))
        if precedence > MAX_MATCHING_PRECEDENCE:
            errs.append(errors.invalid("spec.matchingPrecedence", precedence,
                                       f"must not be greater than {MAX_MATCHING_PRECEDENCE}"))
        if precedence == 1 and name != bootstrap.EXEMPT:
            errs.append(errors.invalid("spec.matchingPrecedence", precedence,
                                       "only the schema named 'exempt' may have matchingPrecedence 1"))
    method = spec.get("distinguisherMethod")
    if isinstance(method, dict) and method.get("type") not in _DISTINGUISHERS:
        rendered = GoRendered("&flowcontrol.FlowDistinguisherMethod{Type:" + go_quote(str(method.get("type") or ""))
                              + "}")
        errs.append(errors.not_supported("spec.distinguisherMethod.type", rendered, _DISTINGUISHERS))
    level = str((spec.get("priorityLevelConfiguration") or {}).get("name") or "")
    if level:
        errs.extend(errors.invalid("spec.priorityLevelConfiguration.name", level, m)
                    for m in validate_dns1123_subdomain(level))
    else:
        errs.append(errors.required("spec.priorityLevelConfiguration.name", "must reference a priority level"))
    for i, rule in enumerate(_list(spec.get("rules"))):
        errs.extend(_validate_rule(rule if isinstance(rule, dict) else {}, f"spec.rules[{i}]"))
    return errs


def _validate_rule(rule: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    subjects = _list(rule.get("subjects"))
    if subjects:
        for i, subject in enumerate(subjects):
            errs.extend(_validate_subject(subject if isinstance(subject, dict) else {}, f"{path}.subjects[{i}]"))
    else:
        errs.append(errors.required(f"{path}.subjects", "subjects must contain at least one value"))
    resource_rules, non_resource_rules = _list(rule.get("resourceRules")), _list(rule.get("nonResourceRules"))
    if not resource_rules and not non_resource_rules:
        errs.append(errors.required(path, "at least one of resourceRules and nonResourceRules has to be non-empty"))
    for i, r in enumerate(resource_rules):
        errs.extend(_validate_resource_rule(r if isinstance(r, dict) else {}, f"{path}.resourceRules[{i}]"))
    for i, r in enumerate(non_resource_rules):
        errs.extend(_validate_non_resource_rule(r if isinstance(r, dict) else {}, f"{path}.nonResourceRules[{i}]"))
    return errs


_SUBJECT_FIELDS = {"ServiceAccount": "serviceAccount", "User": "user", "Group": "group"}
_FORBIDDEN = {"user": "user is forbidden when subject kind is not 'User'",
              "group": "group is forbidden when subject kind is not 'Group'",
              "serviceAccount": "serviceAccount is forbidden when subject kind is not 'ServiceAccount'"}


def _validate_subject(subject: Obj, path: str) -> list[FieldError]:
    kind = subject.get("kind")
    own = _SUBJECT_FIELDS.get(str(kind))
    if own is None:
        return [errors.not_supported(f"{path}.kind", kind or "", _SUBJECT_KINDS)]
    errs: list[FieldError] = []
    value = subject.get(own)
    if not isinstance(value, dict):
        errs.append(errors.required(f"{path}.{own}", f"{own} is required when subject kind is '{kind}'"))
    elif own == "serviceAccount":
        name, namespace = str(value.get("name") or ""), str(value.get("namespace") or "")
        if not name:
            errs.append(errors.required(f"{path}.serviceAccount.name"))
        elif name != "*":
            errs.extend(errors.invalid(f"{path}.serviceAccount.name", name, m)
                        for m in validate_dns1123_subdomain(name))
        if namespace:
            errs.extend(errors.invalid(f"{path}.serviceAccount.namespace", namespace, m)
                        for m in validate_dns1123_label(namespace))
        else:
            errs.append(errors.required(f"{path}.serviceAccount.namespace",
                                        "must specify namespace for service account"))
    elif not value.get("name"):
        errs.append(errors.required(f"{path}.{own}.name"))
    # kube checks the other members in the order user/group (ServiceAccount), serviceAccount/group (User),
    # serviceAccount/user (Group).
    others = {"serviceAccount": ("user", "group"), "user": ("serviceAccount", "group"),
              "group": ("serviceAccount", "user")}[own]
    errs.extend(errors.forbidden(f"{path}.{o}", _FORBIDDEN[o]) for o in others if subject.get(o) is not None)
    return errs


def _has_wildcard(items: list[Any]) -> bool:
    return "*" in items


def _validate_verbs(verbs: list[Any], path: str) -> list[FieldError]:
    if not verbs:
        return [errors.required(f"{path}.verbs", "verbs must contain at least one value")]
    if _has_wildcard(verbs):
        if len(verbs) > 1:
            return [errors.invalid(f"{path}.verbs", string_slice(verbs),
                                   "if '*' is present, must not specify other verbs")]
        return []
    if not set(map(str, verbs)) <= set(_VERBS):
        return [errors.not_supported(f"{path}.verbs", string_slice(verbs), _VERBS)]
    return []


def _validate_resource_rule(rule: Obj, path: str) -> list[FieldError]:
    errs = _validate_verbs(_list(rule.get("verbs")), path)
    groups = _list(rule.get("apiGroups"))
    if not groups:
        errs.append(errors.required(f"{path}.apiGroups", "resource rules must supply at least one api group"))
    elif len(groups) > 1 and _has_wildcard(groups):
        errs.append(errors.invalid(f"{path}.apiGroups", string_slice(groups),
                                   "if '*' is present, must not specify other api groups"))
    resources = _list(rule.get("resources"))
    if not resources:
        errs.append(errors.required(f"{path}.resources", "resource rules must supply at least one resource"))
    elif len(resources) > 1 and _has_wildcard(resources):
        errs.append(errors.invalid(f"{path}.resources", string_slice(resources),
                                   "if '*' is present, must not specify other resources"))
    namespaces = _list(rule.get("namespaces"))
    if not namespaces and not rule.get("clusterScope"):
        errs.append(errors.required(f"{path}.namespaces",
                                    "resource rules that are not cluster scoped must supply at least one namespace"))
    elif _has_wildcard(namespaces):
        if len(namespaces) > 1:
            errs.append(errors.invalid(f"{path}.namespaces", string_slice(namespaces),
                                       "if '*' is present, must not specify other namespaces"))
    else:
        for i, ns in enumerate(namespaces):
            errs.extend(errors.invalid(f"{path}.namespaces[{i}]", str(ns), _NS_INTRO + m)
                        for m in validate_dns1123_label(str(ns)))
    return errs


def _validate_non_resource_rule(rule: Obj, path: str) -> list[FieldError]:
    errs = _validate_verbs(_list(rule.get("verbs")), path)
    urls = _list(rule.get("nonResourceURLs"))
    if not urls:
        errs.append(errors.required(f"{path}.nonResourceURLs", "nonResourceURLs must contain at least one value"))
    elif _has_wildcard(urls):
        if len(urls) > 1:
            errs.append(errors.invalid(f"{path}.nonResourceURLs", string_slice(urls),
                                       "if '*' is present, must not specify other non-resource URLs"))
    else:
        for i, url in enumerate(urls):
            why = _non_resource_url_error(str(url))
            if why:
                errs.append(errors.invalid(f"{path}.nonResourceURLs[{i}]", str(url), why))
    return errs


def _non_resource_url_error(path: str) -> str:
    if not path:
        return "must not be empty"
    if path == "/":
        return ""
    if not path.startswith("/"):
        return "must start with slash"
    if " " in path:
        return "must not contain white-space"
    if "//" in path:
        return "must not contain double slash"
    wildcards = path.count("*")
    if wildcards > 1 or (wildcards == 1 and not path.endswith("/*")):
        return "wildcard can only do suffix matching"
    return ""


def _validate_conditions(conditions: Any) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, condition in enumerate(_list(conditions)):
        kind = str((condition or {}).get("type") or "")
        if kind in seen:
            errs.append(errors.duplicate(f"status.conditions[{i}].type", kind))
        seen.add(kind)
        if not kind:
            errs.append(errors.required(f"status.conditions[{i}].type", "must not be empty"))
    return errs


# -- PriorityLevelConfiguration ----------------------------------------------------------------------------
def validate_priority_level(pl: Obj) -> list[FieldError]:
    name = _name(pl)
    spec = pl.get("spec") or {}
    errs = _validate_pl_spec(name, spec)
    fixed = bootstrap.mandatory("PriorityLevelConfiguration").get(name)
    if fixed is not None:
        mine, theirs = _normal_pl_spec(spec), _normal_pl_spec(fixed["spec"])
        if name == bootstrap.EXEMPT:
            mine.pop("exempt", None)
            theirs.pop("exempt", None)
            if mine != theirs:
                errs.append(errors.invalid(
                    "spec", GoRendered("flowcontrol.PriorityLevelConfigurationSpec{...}"),
                    f"spec of '{name}' except the 'spec.exempt' field must equal the fixed value"))
        elif mine != theirs:
            errs.append(errors.invalid("spec", GoRendered("flowcontrol.PriorityLevelConfigurationSpec{...}"),
                                       f"spec of '{name}' must equal the fixed value"))
    return errs + _validate_conditions((pl.get("status") or {}).get("conditions"))


def validate_priority_level_update(new: Obj, _old: Obj) -> list[FieldError]:
    return validate_priority_level(new)


def _validate_pl_spec(name: str, spec: Obj) -> list[FieldError]:
    errs: list[FieldError] = []
    kind = spec.get("type") or ""
    if (name == bootstrap.EXEMPT) != (kind == "Exempt"):
        errs.append(errors.invalid("spec.type", kind, "type must be 'Exempt' if and only if name is 'exempt'"))
    if kind == "Exempt":
        if spec.get("limited") is not None:
            errs.append(errors.forbidden("spec.limited", "must be nil if the type is not Limited"))
        exempt = spec.get("exempt")
        if isinstance(exempt, dict):
            errs.extend(_validate_shares(exempt, "spec.exempt"))
    elif kind == "Limited":
        if spec.get("exempt") is not None:
            errs.append(errors.forbidden("spec.exempt", "must be nil if the type is Limited"))
        limited = spec.get("limited")
        if not isinstance(limited, dict):
            errs.append(errors.required("spec.limited", "must not be empty when type is Limited"))
        else:
            errs.extend(_validate_shares(limited, "spec.limited", limit_response=limited.get("limitResponse") or {}))
            borrowing = limited.get("borrowingLimitPercent")
            if isinstance(borrowing, int) and borrowing < 0:
                errs.append(errors.invalid("spec.limited.borrowingLimitPercent", borrowing,
                                           "if specified, must be a non-negative integer"))
    else:
        errs.append(errors.not_supported("spec.type", kind, _PL_TYPES))
    return errs


def _validate_shares(section: Obj, path: str, limit_response: Obj | None = None) -> list[FieldError]:
    """Shares and lendable percent (a limited level checks its limitResponse between them, as kube)."""
    errs: list[FieldError] = []
    shares = section.get("nominalConcurrencyShares")
    if isinstance(shares, int) and shares < 0:
        errs.append(errors.invalid(f"{path}.nominalConcurrencyShares", shares, "must be a non-negative integer"))
    if limit_response is not None:
        errs.extend(_validate_limit_response(limit_response, f"{path}.limitResponse"))
    lendable = section.get("lendablePercent")
    if isinstance(lendable, int) and not 0 <= lendable <= 100:
        errs.append(errors.invalid(f"{path}.lendablePercent", lendable, "must be between 0 and 100, inclusive"))
    return errs


def _validate_limit_response(response: Obj, path: str) -> list[FieldError]:
    kind = response.get("type") or ""
    queuing = response.get("queuing")
    if kind == "Reject":
        if queuing is not None:
            return [errors.forbidden(f"{path}.queuing", "must be nil if limited.limitResponse.type is not Limited")]
        return []
    if kind == "Queue":
        if not isinstance(queuing, dict):
            return [errors.required(f"{path}.queuing", "must not be empty if limited.limitResponse.type is Limited")]
        return _validate_queuing(queuing, f"{path}.queuing")
    return [errors.not_supported(f"{path}.type", kind, _LIMIT_RESPONSES)]


def _validate_queuing(queuing: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    length, queues, hand = (int(queuing.get(k) or 0) for k in ("queueLengthLimit", "queues", "handSize"))
    if length <= 0:
        errs.append(errors.invalid(f"{path}.queueLengthLimit", length, "must be positive"))
    if queues <= 0:
        errs.append(errors.invalid(f"{path}.queues", queues, "must be positive"))
    elif queues > MAX_QUEUES:
        errs.append(errors.invalid(f"{path}.queues", queues, f"must not be greater than {MAX_QUEUES}"))
    if hand <= 0:
        errs.append(errors.invalid(f"{path}.handSize", hand, "must be positive"))
    elif hand > queues:
        errs.append(errors.invalid(f"{path}.handSize", hand, f"should not be greater than queues ({queues})"))
    elif required_entropy_bits(queues, hand) > MAX_HASH_BITS:
        errs.append(errors.invalid(f"{path}.handSize", hand,
                                   f"required entropy bits of deckSize {queues} and handSize {hand} should not be "
                                   f"greater than {MAX_HASH_BITS}"))
    return errs


# -- comparing with the fixed mandatory specs ----------------------------------------------------------------
def _normal_fs_spec(spec: Obj) -> Obj:
    """A FlowSchema spec as Go's semantic equality sees it: empty lists and false flags are absent."""
    return _prune(copy.deepcopy(spec))


def _normal_pl_spec(spec: Obj) -> Obj:
    return _prune(copy.deepcopy(spec))


def _prune(value: Any) -> Any:
    if isinstance(value, dict):
        out = {k: _prune(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, [], {}, False)}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value
