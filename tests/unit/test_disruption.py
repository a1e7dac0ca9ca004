"""The PodDisruptionBudget rules of the eviction subresource (kube 1.33's EvictionREST), pure."""

from __future__ import annotations

from typing import Any

import pytest
from coreapi import disruption
from genericapi.apimachinery.errors import APIError

NOW = "2026-01-01T00:00:00Z"


def pod(labels: dict[str, str] | None = None, namespace: str = "ns", phase: str = "Running", ready: bool = True,
        deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": namespace, "labels": labels or {}}
    if deleting:
        meta["deletionTimestamp"] = NOW
    return {"metadata": meta, "status": {"phase": phase, "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}}


def pdb(name: str = "b", selector: Any = None, namespace: str = "ns", **status: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"metadata": {"name": name, "namespace": namespace, "generation": 1},
                           "spec": {"selector": selector}}
    if status:
        out["status"] = {"observedGeneration": 1, **status}
    return out


def test_matching_by_selector_in_the_pods_namespace() -> None:
    web = pdb("web", {"matchLabels": {"app": "web"}})
    expr = pdb("expr", {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]})
    elsewhere = pdb("elsewhere", {"matchLabels": {"app": "web"}}, namespace="other")
    assert disruption.matching_pdbs([web, expr, elsewhere], pod({"app": "web"})) == [web]
    assert disruption.matching_pdbs([web, expr], pod({"app": "web", "tier": "b"})) == [web, expr]
    assert disruption.matching_pdbs([web, expr], pod({"app": "db"})) == []


def test_nil_empty_and_broken_selectors_match_nothing() -> None:
    nil, empty = pdb("nil", None), pdb("empty", {})
    broken = pdb("broken", {"matchExpressions": [{"key": "a", "operator": "Near", "values": ["x"]}]})
    bad_key = pdb("badkey", {"matchLabels": {"-x-": "y"}})
    assert disruption.matching_pdbs([nil, empty, broken, bad_key], pod({"a": "x", "-x-": "y"})) == []


@pytest.mark.parametrize(("phase", "deleting", "ignore", "enforce"), [
    ("Pending", False, True, True),
    ("Running", False, False, True),
    ("Succeeded", False, True, False),
    ("Failed", False, True, False),
    ("Running", True, True, False),
])
def test_pods_that_skip_the_budget(phase: str, deleting: bool, ignore: bool, enforce: bool) -> None:
    p = pod(phase=phase, deleting=deleting)
    assert disruption.can_ignore_pdb(p) is ignore
    assert disruption.should_enforce_resource_version(p) is enforce


def test_unready_pods_and_the_unhealthy_pod_eviction_policy() -> None:
    healthy = pdb(currentHealthy=3, desiredHealthy=2, disruptionsAllowed=0)
    sick = pdb(currentHealthy=1, desiredHealthy=2, disruptionsAllowed=0)
    nothing_desired = pdb(currentHealthy=0, desiredHealthy=0, disruptionsAllowed=0)
    assert disruption.unready_pod_may_go(pod(ready=False), healthy)
    assert not disruption.unready_pod_may_go(pod(ready=False), sick)
    assert not disruption.unready_pod_may_go(pod(ready=False), nothing_desired)
    assert not disruption.unready_pod_may_go(pod(ready=True), healthy)  # a ready pod spends the budget
    lenient = {**sick, "spec": {**sick["spec"], "unhealthyPodEvictionPolicy": "AlwaysAllow"}}
    assert disruption.unready_pod_may_go(pod(ready=False), lenient)
    strict = {**healthy, "spec": {**healthy["spec"], "unhealthyPodEvictionPolicy": "IfHealthyBudget"}}
    assert disruption.unready_pod_may_go(pod(ready=False), strict)


def test_spending_a_disruption() -> None:
    budget = pdb(disruptionsAllowed=2, currentHealthy=3, desiredHealthy=1)
    first = disruption.check_and_decrement(budget, "p1", NOW, dry_run=False).pdb
    assert first["status"]["disruptionsAllowed"] == 1
    assert first["status"]["disruptedPods"] == {"p1": NOW}
    assert "conditions" not in first["status"]
    assert budget["status"]["disruptionsAllowed"] == 2  # the input is not changed
    second = disruption.check_and_decrement(first, "p2", NOW, dry_run=False).pdb
    assert second["status"]["disruptedPods"] == {"p1": NOW, "p2": NOW}
    assert second["status"]["conditions"] == [{"type": "DisruptionAllowed", "status": "False", "observedGeneration": 1,
                                               "lastTransitionTime": NOW, "reason": "InsufficientPods", "message": ""}]
    dry = disruption.check_and_decrement(budget, "p3", NOW, dry_run=True).pdb
    assert dry["status"]["disruptionsAllowed"] == 1 and "disruptedPods" not in dry["status"]


def test_refusals() -> None:
    with pytest.raises(APIError) as err:
        disruption.check_and_decrement(pdb(disruptionsAllowed=0, currentHealthy=2, desiredHealthy=3), "p", NOW, False)
    assert (err.value.code, err.value.message) == (429, disruption.TOO_MANY_MESSAGE)
    cause = "The disruption budget b needs 3 healthy pods and has 2 currently"
    assert err.value.details == {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    assert "Retry-After" not in err.value.headers
    stale = pdb(disruptionsAllowed=5)
    stale["metadata"]["generation"] = 2
    with pytest.raises(APIError) as err:
        disruption.check_and_decrement(stale, "p", NOW, False)
    assert err.value.code == 429 and err.value.headers["Retry-After"] == "10"
    assert err.value.details is not None and err.value.details["retryAfterSeconds"] == 10
    with pytest.raises(APIError) as err:
        disruption.check_and_decrement(pdb(disruptionsAllowed=-1), "p", NOW, False)
    assert (err.value.code, err.value.message) == (
        403, 'poddisruptionbudget.policy "b" is forbidden: pdb disruptions allowed is negative')
    crowded = pdb(disruptionsAllowed=1, disruptedPods={f"p{i}": NOW for i in range(2001)})
    with pytest.raises(APIError) as err:
        disruption.check_and_decrement(crowded, "p", NOW, False)
    assert err.value.code == 403 and disruption.TOO_MANY_DISRUPTED in err.value.message
