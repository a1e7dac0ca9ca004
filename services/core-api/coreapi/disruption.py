"""PodDisruptionBudget rules the eviction subresource applies (pure: no I/O).

What kube's ``EvictionREST`` decides from a Pod and the PDBs of its namespace: which budgets
cover the Pod, whether the Pod may be deleted without consulting them, whether an unready Pod
may go without spending the budget, and whether a budget allows one more disruption (and what
its status becomes when it does). The I/O (reading, the status write, the delete) is in
``eviction``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.labels import LabelSelectorError, from_label_selector_object

#: ``MaxDisruptedPodSize``: evictions approved but not yet seen by the disruption controller.
MAX_DISRUPTED_POD_SIZE = 2000
TOO_MANY_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE_PDBS_MESSAGE = ("This pod has more than one PodDisruptionBudget, which the eviction subresource does "
                         "not support.")
TOO_MANY_DISRUPTED = "DisruptedPods map too big - too many evictions not confirmed by PDB controller"


def matching_pdbs(pdbs: list[dict[str, Any]], pod: dict[str, Any]) -> list[dict[str, Any]]:
    """``getPodDisruptionBudgets``: PDBs of the Pod's namespace whose selector matches its labels.
    A selector that does not parse matches nothing; so does a nil or empty one (never everything)."""
    meta = pod.get("metadata") or {}
    namespace, labels = meta.get("namespace", ""), meta.get("labels") or {}
    found = []
    for pdb in pdbs:
        if (pdb.get("metadata") or {}).get("namespace", "") != namespace:
            continue
        try:
            selector = from_label_selector_object((pdb.get("spec") or {}).get("selector"))
        except (LabelSelectorError, ValueError):
            continue
        if selector.empty or not selector.matches(labels):
            continue
        found.append(pdb)
    return found


def can_ignore_pdb(pod: dict[str, Any]) -> bool:
    """``canIgnorePDB``: a finished, pending or terminating Pod is deleted without a budget check."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def should_enforce_resource_version(pod: dict[str, Any]) -> bool:
    """``shouldEnforceResourceVersion``: the delete is pinned unless the Pod is finished or terminating."""
    phase = (pod.get("status") or {}).get("phase")
    return not (phase in ("Succeeded", "Failed") or (pod.get("metadata") or {}).get("deletionTimestamp"))


def is_pod_ready(pod: dict[str, Any]) -> bool:
    """``IsPodReady``: the Ready condition is True."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def _status(pdb: dict[str, Any]) -> dict[str, Any]:
    status = pdb.get("status")
    return status if isinstance(status, dict) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def unready_pod_may_go(pod: dict[str, Any], pdb: dict[str, Any]) -> bool:
    """An unready Pod does not count towards the budget: it goes without spending a disruption
    when the PDB's ``unhealthyPodEvictionPolicy`` is AlwaysAllow, or (IfHealthyBudget, the default)
    when the application is healthy enough already."""
    if is_pod_ready(pod):
        return False
    if (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
        return True
    status = _status(pdb)
    desired = _int(status.get("desiredHealthy"))
    return _int(status.get("currentHealthy")) >= desired and desired > 0


def too_many_requests(cause: str, retry_after: int) -> apierrors.APIError:
    """``NewTooManyRequests`` with a DisruptionBudget cause (no Retry-After when 0, as kube)."""
    details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return apierrors.APIError(429, "TooManyRequests", TOO_MANY_MESSAGE, details)


def still_processing(name: str) -> apierrors.APIError:
    """``createTooManyRequestsError``: the budget's status is older than its spec (10 s to retry)."""
    return too_many_requests(f"The disruption budget {name} is still being processed by the server.", 10)


@dataclass(frozen=True)
class Decrement:
    """The PDB as it is written back after one approved eviction."""

    pdb: dict[str, Any]


def check_and_decrement(pdb: dict[str, Any], pod_name: str, now: str, dry_run: bool) -> Decrement:
    """``checkAndDecrement``: refuse (429/403) or spend one disruption, recording the Pod in
    ``disruptedPods`` (not on dry-run). Raises the error kube returns."""
    meta = pdb.get("metadata") or {}
    name = str(meta.get("name", ""))
    status = _status(pdb)
    if _int(status.get("observedGeneration")) < _int(meta.get("generation")):
        raise still_processing(name)
    allowed = _int(status.get("disruptionsAllowed"))
    if allowed < 0:
        raise apierrors.forbidden_error("policy", "poddisruptionbudget", name, "pdb disruptions allowed is negative")
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_POD_SIZE:
        raise apierrors.forbidden_error("policy", "poddisruptionbudget", name, TOO_MANY_DISRUPTED)
    if allowed == 0:
        raise too_many_requests(f"The disruption budget {name} needs {_int(status.get('desiredHealthy'))} healthy "
                                f"pods and has {_int(status.get('currentHealthy'))} currently", 0)
    out = copy.deepcopy(pdb)
    new_status = out.setdefault("status", {})
    new_status["disruptionsAllowed"] = allowed - 1
    if allowed - 1 == 0:
        _set_disruption_allowed(new_status, now)
    if not dry_run:
        new_status.setdefault("disruptedPods", {})
        new_status["disruptedPods"] = {**(new_status["disruptedPods"] or {}), pod_name: now}
    return Decrement(out)


def _set_disruption_allowed(status: dict[str, Any], now: str) -> None:
    """``UpdateDisruptionAllowedCondition`` once no disruption is left: DisruptionAllowed=False,
    InsufficientPods (``meta.SetStatusCondition``: the transition time moves on a status change)."""
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        conditions = status["conditions"] = []
    wanted = {"type": "DisruptionAllowed", "status": "False",
              "observedGeneration": _int(status.get("observedGeneration")),
              "lastTransitionTime": now, "reason": "InsufficientPods", "message": ""}
    for cond in conditions:
        if isinstance(cond, dict) and cond.get("type") == "DisruptionAllowed":
            if cond.get("status") == "False":
                wanted["lastTransitionTime"] = cond.get("lastTransitionTime") or now
            cond.clear()
            cond.update(wanted)
            return
    conditions.append(wanted)
