"""What reconciling a default RBAC object against what is stored changes (kube's ``reconciliation``).

Pure functions, so the rules are unit-tested without a server. kube-apiserver's
``rbac/bootstrap-roles`` hook never takes permissions away: an object whose
``rbac.authorization.kubernetes.io/autoupdate`` annotation is ``"false"`` is left alone; any other
gets the default labels, annotations, aggregation selectors, rules and subjects it lacks, added to
what users put there. A rule counts as present when the stored rules cover it (``validation.Covers``:
wildcards included); the uncovered parts are appended broken down to one verb, group, resource and
name each, as kube appends them. An aggregationRule added to a default role that has none is
removed (the aggregation controller would replace its rules). A binding whose roleRef differs
is deleted and created again (roleRef cannot be updated).
"""

from __future__ import annotations

import copy
from typing import Any

from .rbac_policy import AUTOUPDATE, Obj, Rule


def protected(obj: Obj) -> bool:
    """Users opt out of reconciliation with ``autoupdate: "false"``."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return annotations.get(AUTOUPDATE) == "false"


def breakdown(r: Rule) -> list[Rule]:
    """One rule per verb x group x resource x name (or per URL x verb), as kube's ``BreakdownRule``."""
    out: list[Rule] = []
    verbs = r.get("verbs") or []
    for g in r.get("apiGroups") or []:
        for res in r.get("resources") or []:
            for v in verbs:
                names = r.get("resourceNames") or []
                if names:
                    out += [{"apiGroups": [g], "resourceNames": [n], "resources": [res], "verbs": [v]} for n in names]
                else:
                    out.append({"apiGroups": [g], "resources": [res], "verbs": [v]})
    for url in r.get("nonResourceURLs") or []:
        out += [{"nonResourceURLs": [url], "verbs": [v]} for v in verbs]
    return out


def _has(values: list[str], wanted: str) -> bool:
    return "*" in values or wanted in values


def _resource_covered(owner: list[str], wanted: str) -> bool:
    if _has(owner, wanted):
        return True
    if "/" in wanted:  # "*/scale" covers "deployments/scale"; "deployments/*" covers its subresources
        base, sub = wanted.split("/", 1)
        return f"*/{sub}" in owner or f"{base}/*" in owner
    return False


def _url_covered(owner: list[str], wanted: str) -> bool:
    return any(o == wanted or o == "*" or (o.endswith("*") and wanted.startswith(o[:-1])) for o in owner)


def rule_covers(owner: Rule, sub: Rule) -> bool:
    """Whether ``owner`` allows everything the atomic rule ``sub`` allows (kube's ``ruleCovers``)."""
    if not all(_has(owner.get("verbs") or [], v) for v in sub.get("verbs") or []):
        return False
    if sub.get("nonResourceURLs"):
        return all(_url_covered(owner.get("nonResourceURLs") or [], u) for u in sub["nonResourceURLs"])
    if not all(_has(owner.get("apiGroups") or [], g) for g in sub.get("apiGroups") or []):
        return False
    if not all(_resource_covered(owner.get("resources") or [], r) for r in sub.get("resources") or []):
        return False
    owner_names = owner.get("resourceNames") or []
    sub_names = sub.get("resourceNames") or []
    if not sub_names:  # an unrestricted rule is covered only by an unrestricted one
        return not owner_names
    return not owner_names or all(n in owner_names for n in sub_names)


def missing_rules(owner: list[Rule], wanted: list[Rule]) -> list[Rule]:
    """The atomic parts of ``wanted`` that no rule of ``owner`` covers (``validation.Covers``)."""
    out: list[Rule] = []
    for r in wanted:
        for sub in breakdown(r):
            if not any(rule_covers(o, sub) for o in owner) and sub not in out:
                out.append(sub)
    return out


def _merged_meta(result: Obj, expected: Obj) -> None:
    """Default labels and annotations added; a value the stored object has wins (kube's ``merge``)."""
    meta = result.setdefault("metadata", {})
    for key in ("labels", "annotations"):
        want = (expected.get("metadata") or {}).get(key) or {}
        meta[key] = {**want, **(meta.get(key) or {})}


def reconcile_role(existing: Obj, expected: Obj) -> Obj | None:
    """The stored (Cluster)Role with what the default adds, or None when nothing changes or it is protected."""
    if protected(existing):
        return None
    result = copy.deepcopy(existing)
    _merged_meta(result, expected)
    want_agg = expected.get("aggregationRule")
    if want_agg is None:
        result.pop("aggregationRule", None)  # kube drops one a user added to a plain default role
    else:
        have = result.get("aggregationRule") or {}
        selectors = list(have.get("clusterRoleSelectors") or [])
        selectors += [s for s in want_agg.get("clusterRoleSelectors") or [] if s not in selectors]
        result["aggregationRule"] = {**have, "clusterRoleSelectors": selectors}
    rules = list(result.get("rules") or [])
    result["rules"] = rules + missing_rules(rules, expected.get("rules") or [])
    if _comparable(result) == _comparable(existing):
        return None
    return result


def _comparable(obj: Obj) -> Any:
    meta = obj.get("metadata") or {}
    return (meta.get("labels") or {}, meta.get("annotations") or {}, obj.get("aggregationRule"),
            obj.get("rules") or [], obj.get("subjects") or [], obj.get("roleRef"))


def _subject_key(s: Obj) -> tuple[str, str, str, str]:
    return (str(s.get("kind", "")), str(s.get("apiGroup", "")), str(s.get("name", "")), str(s.get("namespace", "")))


def needs_recreate(existing: Obj, expected: Obj) -> bool:
    """roleRef is immutable: a binding pointing elsewhere is replaced (unless protected)."""
    return not protected(existing) and existing.get("roleRef") != expected.get("roleRef")


def reconcile_binding(existing: Obj, expected: Obj) -> Obj | None:
    """The stored binding with the default's missing subjects appended, or None (unchanged or protected)."""
    if protected(existing):
        return None
    result = copy.deepcopy(existing)
    _merged_meta(result, expected)
    subjects = list(result.get("subjects") or [])
    have = {_subject_key(s) for s in subjects}
    subjects += [s for s in expected.get("subjects") or [] if _subject_key(s) not in have]
    if subjects or "subjects" in result:
        result["subjects"] = subjects
    if _comparable(result) == _comparable(existing):
        return None
    return result
