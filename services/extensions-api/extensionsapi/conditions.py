"""CRD status conditions, set and read as apiextensions' helpers do.

A condition's ``lastTransitionTime`` moves only when its status changes; reason and message are
replaced in place. Conditions keep the order they were first added in.
"""

from __future__ import annotations

from typing import Any

from genericapi.registry.meta import now_rfc3339


def find(crd: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for cond in (crd.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return None


def is_true(crd: dict[str, Any], type_: str) -> bool:
    cond = find(crd, type_)
    return cond is not None and cond.get("status") == "True"


def set_condition(crd: dict[str, Any], type_: str, status: str, reason: str, message: str) -> None:
    st = crd.get("status")
    if not isinstance(st, dict):
        st = crd["status"] = {}
    conds = st.get("conditions")
    if not isinstance(conds, list):
        conds = st["conditions"] = []
    new = {"type": type_, "status": status, "lastTransitionTime": now_rfc3339(), "reason": reason,
           "message": message}
    for i, cond in enumerate(conds):
        if isinstance(cond, dict) and cond.get("type") == type_:
            if cond.get("status") == status and cond.get("lastTransitionTime"):
                new["lastTransitionTime"] = cond["lastTransitionTime"]
            conds[i] = new
            return
    conds.append(new)


def equivalent(crd: dict[str, Any], type_: str, status: str, reason: str, message: str) -> bool:
    """Whether the condition already says this (ignoring its transition time)."""
    cond = find(crd, type_)
    return cond is not None and (cond.get("status"), cond.get("reason"), cond.get("message")) == \
        (status, reason, message)
