"""Type-checking a ValidatingAdmissionPolicy against the kinds it matches (kube's ``validating.TypeChecker``).

kube's policy status controller checks each ``spec.validations[i].expression`` and
``messageExpression`` against the schema of every kind the ``matchConstraints.resourceRules``
name explicitly (wildcards and subresources skipped, at most 10 kinds, sorted by group, version,
resource), and writes what it finds to ``status.typeChecking.expressionWarnings`` as
``{fieldRef: "spec.validations[0].expression", warning: "apps/v1, Kind=Deployment: ERROR: ..."}``.
The interpreter has no checker, so this finds what ``cel.checks`` can: fields of ``object`` and
``oldObject`` the kind's schema does not declare (``undefined field 'replicas'``); wrong operand
types are not found.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from genericapi.apimachinery.schemas import SchemaCatalog

MAX_TYPES_TO_CHECK = 10
_OBJECT_VARS = frozenset({"object", "oldObject"})

#: (group, version, resource) -> (kind, schema of the kind with properties inline) or None.
KindLookup = Callable[[str, str, str], "tuple[str, dict[str, Any]] | None"]



@functools.cache
def _known() -> frozenset[str]:
    """The functions and variables a policy's expressions may name (CEL's library loads on first use,
    not when the server starts)."""
    from genericapi.apimachinery.cel import authz
    from genericapi.apimachinery.cel.library import KNOWN_FUNCTIONS

    return frozenset(KNOWN_FUNCTIONS) | frozenset(authz.FUNCTIONS) | frozenset(
        {"request", "params", "namespaceObject", "authorizer", "variables"})

@dataclass(frozen=True)
class ExpressionWarning:
    field_ref: str
    warning: str

    def to_dict(self) -> dict[str, str]:
        return {"fieldRef": self.field_ref, "warning": self.warning}


def inline(catalog: SchemaCatalog, node: Mapping[str, Any], depth: int = 8) -> dict[str, Any]:
    """A built-in definition with ``$ref``/``allOf`` followed ``depth`` levels deep, so field checks
    can walk it (below that depth a node is left schemaless: nothing is reported there)."""
    if depth <= 0:
        return {}
    for key in ("allOf", "anyOf", "oneOf"):  # a single (nullable) reference
        options = node.get(key)
        if isinstance(options, list):
            real = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
            if len(real) == 1:
                node = real[0]
    resolved = catalog.resolve(node)
    out = {k: v for k, v in resolved.items() if k not in ("properties", "items", "additionalProperties")}
    if isinstance(out.get("type"), list):  # JSON Schema's ["object", "null"]
        out["type"] = next((t for t in out["type"] if t != "null"), None)
    if isinstance(resolved.get("properties"), dict):
        out["properties"] = {k: inline(catalog, v, depth - 1) for k, v in resolved["properties"].items()
                             if isinstance(v, dict)}
        out.setdefault("type", "object")
    for key in ("items", "additionalProperties"):
        if isinstance(resolved.get(key), dict):
            out[key] = inline(catalog, resolved[key], depth - 1)
    return out


def _explicit(values: Any) -> list[str]:
    return sorted({str(v) for v in values or () if v != "*"}) if isinstance(values, list) else []


def types_to_check(policy: dict[str, Any], lookup: KindLookup) -> list[tuple[str, dict[str, Any]]]:
    """kube's ``typesToCheck``: (``group/version, Kind=K``, schema) of the explicitly matched kinds."""
    rules = ((policy.get("spec") or {}).get("matchConstraints") or {}).get("resourceRules") or []
    out: list[tuple[str, dict[str, Any]]] = []
    for rule in rules if isinstance(rules, list) else ():
        if not isinstance(rule, dict):
            continue
        groups, versions = _explicit(rule.get("apiGroups")), _explicit(rule.get("apiVersions"))
        resources = [r for r in _explicit(rule.get("resources")) if "/" not in r]
        for group in groups:
            for version in versions:
                for resource in resources:
                    found = lookup(group, version, resource)
                    if found is None:
                        continue
                    kind, schema = found
                    gv = f"{group}/{version}" if group else f"/{version}"
                    out.append((f"{gv}, Kind={kind}", schema))
                    if len(out) >= MAX_TYPES_TO_CHECK:
                        return out
    return out


def check(policy: dict[str, Any], lookup: KindLookup) -> list[ExpressionWarning]:
    """The warnings kube's controller writes for ``policy``."""
    types = types_to_check(policy, lookup)
    if not types:
        return []
    from genericapi.apimachinery.cel.checks import find_issues

    warnings: list[ExpressionWarning] = []
    for i, v in enumerate((policy.get("spec") or {}).get("validations") or []):
        if not isinstance(v, dict):
            continue
        for key in ("expression", "messageExpression"):
            src = v.get(key)
            if not isinstance(src, str) or not src:
                continue
            results = []
            for gvk, schema in types:
                try:
                    issues = find_issues(src, schema, _known(), _OBJECT_VARS, True)
                except Exception:  # an expression the token scanner cannot follow: nothing to report
                    issues = []
                if issues:
                    results.append(f"{gvk}: " + "\n".join(issues))
            if results:
                text = results[0] if len(results) == 1 else "".join(r + "\n" for r in results)
                warnings.append(ExpressionWarning(f"spec.validations[{i}].{key}", text))
    return warnings
