"""The DefaultTolerationSeconds admission hook: which Pods get the not-ready and unreachable
NoExecute tolerations, as kube's plugin decides."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from coreapi.admission_tolerations import NOT_READY, UNREACHABLE, DefaultTolerationSeconds, add_default_tolerations
from genericapi.apimachinery.resources import ResourceInfo
from support.admission import run_admit

PODS = ResourceInfo("", "v1", "Pod", "pods", "pod", namespaced=True)
TEMPLATES = ResourceInfo("", "v1", "PodTemplate", "podtemplates", "podtemplate", namespaced=True)


def default(key: str, seconds: int = 300) -> dict[str, Any]:
    return {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}


def added(tolerations: list[Any] | None) -> list[Any]:
    spec: dict[str, Any] = {} if tolerations is None else {"tolerations": copy.deepcopy(tolerations)}
    add_default_tolerations(spec)
    return spec.get("tolerations", [])[len(tolerations or []):]


def test_a_pod_without_tolerations_gets_both() -> None:
    assert added(None) == [default(NOT_READY), default(UNREACHABLE)]
    assert added([]) == [default(NOT_READY), default(UNREACHABLE)]


@pytest.mark.parametrize(("existing", "expected"), [
    ([{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}], [UNREACHABLE]),
    ([{"key": UNREACHABLE, "operator": "Exists"}], [NOT_READY]),  # empty effect: every effect
    ([{"operator": "Exists", "effect": "NoExecute"}], []),  # empty key: every taint
    ([{"operator": "Exists"}], []),
    ([{"key": NOT_READY, "operator": "Exists", "effect": "NoSchedule"}], [NOT_READY, UNREACHABLE]),
    ([{"key": "other", "operator": "Exists", "effect": "NoExecute"}], [NOT_READY, UNREACHABLE]),
    (["not a toleration", None], [NOT_READY, UNREACHABLE]),
])
def test_existing_tolerations_decide(existing: list[Any], expected: list[str]) -> None:
    assert added(existing) == [default(k) for k in expected]


async def test_hook_handles_pod_creates_and_updates_only() -> None:
    hook = DefaultTolerationSeconds()
    for operation in ("CREATE", "UPDATE"):
        obj: dict[str, Any] = {"spec": {"containers": []}}
        await run_admit(hook, operation, PODS, "ns", obj)
        assert obj["spec"]["tolerations"] == [default(NOT_READY), default(UNREACHABLE)]
    for operation, info in (("DELETE", PODS), ("CREATE", TEMPLATES)):
        untouched: dict[str, Any] = {"spec": {"containers": []}}
        await run_admit(hook, operation, info, "ns", untouched)
        assert untouched == {"spec": {"containers": []}}
    # an update of a pod that has them already adds nothing twice
    twice: dict[str, Any] = {"spec": {}}
    await run_admit(hook, "CREATE", PODS, "ns", twice)
    await run_admit(hook, "UPDATE", PODS, "ns", twice)
    assert len(twice["spec"]["tolerations"]) == 2


async def test_malformed_specs_are_left_for_validation() -> None:
    hook = DefaultTolerationSeconds(seconds=60)
    for bad in ({"spec": "x"}, {"spec": {"tolerations": "x"}}, {}):
        obj = copy.deepcopy(bad)
        await run_admit(hook, "CREATE", PODS, "ns", obj)
        assert obj == bad
    custom: dict[str, Any] = {"spec": {}}
    await run_admit(hook, "CREATE", PODS, "ns", custom)
    assert custom["spec"]["tolerations"][0]["tolerationSeconds"] == 60
