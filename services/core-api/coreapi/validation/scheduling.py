"""PriorityClasses (``scheduling.k8s.io/v1``): kube 1.33's ValidatePriorityClass and its update rules.

The ``system-`` name prefix is reserved for the classes kube-apiserver creates itself, with their
exact value and globalDefault false; any other class may not go above the highest user-definable
priority. ``value`` and ``preemptionPolicy`` never change once written.
"""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery import errors
from genericapi.apimachinery.errors import FieldError

from .workloads import immutable

SYSTEM_PREFIX = "system-"
#: The highest priority a user-defined class may have (kube's HighestUserDefinablePriority).
HIGHEST_USER_DEFINABLE = 1_000_000_000
#: The classes kube-apiserver creates at start-up: (name, value, description).
SYSTEM_PRIORITY_CLASSES: tuple[tuple[str, int, str], ...] = (
    ("system-node-critical", 2000001000,
     "Used for system critical pods that must not be moved from their current node."),
    ("system-cluster-critical", 2000000000,
     "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."),
)
_PREEMPTION_POLICIES = ("Never", "PreemptLowerPriority")


def _system_class_error(name: str, value: Any, global_default: Any) -> str:
    """Why a ``system-`` class is not one of the known ones ("" when it is)."""
    for known, known_value, _description in SYSTEM_PRIORITY_CLASSES:
        if known == name:
            if value != known_value:
                return f"value of {name} PriorityClass must be {known_value}"
            if bool(global_default):
                return f"globalDefault of {name} PriorityClass must be false"
            return ""
    return f"{name} is not a known system priority class"


def validate_priority_class(pc: dict[str, Any]) -> list[FieldError]:
    name = str((pc.get("metadata") or {}).get("name") or "")
    value = pc.get("value")
    errs: list[FieldError] = []
    if name.startswith(SYSTEM_PREFIX):
        why = _system_class_error(name, value, pc.get("globalDefault"))
        if why:
            errs.append(errors.forbidden("metadata.name", f"priority class names with '{SYSTEM_PREFIX}' prefix "
                                                          f"are reserved for system use only. error: {why}"))
    elif isinstance(value, int) and value > HIGHEST_USER_DEFINABLE:
        errs.append(errors.forbidden("value", f"maximum allowed value of a user defined priority is "
                                              f"{HIGHEST_USER_DEFINABLE}"))
    policy = pc.get("preemptionPolicy")
    if policy is not None and policy not in _PREEMPTION_POLICIES:
        errs.append(errors.not_supported("preemptionPolicy", policy, _PREEMPTION_POLICIES))
    return errs


def validate_priority_class_update(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    if new.get("value") != old.get("value"):
        errs.append(errors.forbidden("value", "may not be changed in an update."))
    policy = new.get("preemptionPolicy")
    errs += immutable(policy, old.get("preemptionPolicy"), "preemptionPolicy", policy)
    return errs
