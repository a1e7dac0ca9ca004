"""Name reservation between CRDs of one group (kube's NamingConditionController, as a pure function).

A CRD may only claim a plural, singular, short name, kind or list kind that no other CRD of its
group has already been granted (``status.acceptedNames``). Names already accepted for this CRD
stay its own. The result is the names to accept plus the ``NamesAccepted`` and ``Established``
conditions to write, with kube's reasons and messages.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import conditions


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class NamingResult:
    accepted: dict[str, Any]
    names_accepted: Condition
    established: Condition


def _claimed(others: Iterable[dict[str, Any]], group: str, me: str) -> tuple[set[str], set[str]]:
    resources: set[str] = set()
    kinds: set[str] = set()
    for crd in others:
        if (crd.get("metadata") or {}).get("name") == me or (crd.get("spec") or {}).get("group") != group:
            continue
        acc = (crd.get("status") or {}).get("acceptedNames") or {}
        resources.update(n for n in (acc.get("plural"), acc.get("singular")) if n)
        resources.update(acc.get("shortNames") or [])
        kinds.update(n for n in (acc.get("kind"), acc.get("listKind")) if n)
    return resources, kinds


def _in_use(requested: Any, accepted: Any, used: set[str]) -> str:
    if requested == accepted or requested not in used:
        return ""
    return f'"{requested}" is already in use'


def compute_names(crd: dict[str, Any], all_crds: Iterable[dict[str, Any]]) -> NamingResult:
    spec = crd.get("spec") or {}
    requested: dict[str, Any] = spec.get("names") or {}
    accepted: dict[str, Any] = dict((crd.get("status") or {}).get("acceptedNames") or {})
    resources, kinds = _claimed(all_crds, spec.get("group", ""), (crd.get("metadata") or {}).get("name", ""))
    new = dict(accepted)
    problem: tuple[str, str] | None = None

    def check(field: str, used: set[str], reason: str) -> None:
        nonlocal problem
        msg = _in_use(requested.get(field), accepted.get(field), used)
        if msg:
            problem = (reason, msg)
        elif requested.get(field) is not None:
            new[field] = requested.get(field)

    check("plural", resources, "PluralConflict")
    check("singular", resources, "SingularConflict")
    req_short = list(requested.get("shortNames") or [])
    if req_short != list(accepted.get("shortNames") or []):
        mine = set(accepted.get("shortNames") or [])
        errs = [f'"{s}" is already in use' for s in req_short
                if s not in mine and s not in (accepted.get("plural"), accepted.get("singular")) and s in resources]
        if errs:
            problem = ("ShortNamesConflict", errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")
        elif req_short:
            new["shortNames"] = req_short
        else:
            new.pop("shortNames", None)
    check("kind", kinds, "KindConflict")
    check("listKind", kinds, "ListKindConflict")
    if requested.get("categories"):
        new["categories"] = list(requested["categories"])
    else:
        new.pop("categories", None)
    if problem is None:
        names_cond = Condition("NamesAccepted", "True", "NoConflicts", "no conflicts found")
    else:
        names_cond = Condition("NamesAccepted", "False", problem[0], problem[1])
    est = conditions.find(crd, "Established")
    if est is not None:
        established = Condition("Established", str(est.get("status", "")), str(est.get("reason", "")),
                                str(est.get("message", "")))
    else:
        established = Condition("Established", "False", "NotAccepted", "not all names are accepted")
    if established.status != "True" and names_cond.status == "True":
        established = Condition("Established", "False", "Installing", "the initial names have been accepted")
    new.setdefault("plural", "")
    new.setdefault("kind", "")
    return NamingResult(new, names_cond, established)
