"""The Priority admission hook: priority resolution of new Pods, kube's Forbidden messages, update
preservation and the single global-default PriorityClass."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from coreapi.admission_priority import (
    SYSTEM_PRIORITY_CLASSES,
    Priority,
    admit_pod_spec,
    default_class,
    default_conflict,
    system_priority_class_objects,
)
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.registry.options import ListResult
from support.admission import run_admit

PODS = ResourceInfo("", "v1", "Pod", "pods", "pod", namespaced=True)
CLASSES = ResourceInfo("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", "priorityclass",
                       namespaced=False)


class ColdCache:
    ready = False


class FakeStore:
    """Enough of a Store for the hook: a not-yet-synced cache, get and list."""

    def __init__(self, info: ResourceInfo, objects: list[dict[str, Any]]) -> None:
        self.info = info
        self.cache = ColdCache()
        self.objects = {o["metadata"]["name"]: o for o in objects}
        self.gets: list[str] = []

    def key(self, namespace: str, name: str) -> bytes:
        return f"/{namespace}/{name}".encode()

    async def get(self, _namespace: str, name: str) -> dict[str, Any]:
        self.gets.append(name)
        if name not in self.objects:
            raise APIError(404, "NotFound", f'"{name}" not found')
        return copy.deepcopy(self.objects[name])

    async def list(self, _namespace: str, _opts: Any) -> ListResult:
        return ListResult([(copy.deepcopy(o), b"") for o in self.objects.values()], 1)


def pc(name: str, value: int, default: bool = False, policy: str | None = "PreemptLowerPriority") -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": name}, "value": value, "globalDefault": default}
    if policy is not None:
        obj["preemptionPolicy"] = policy
    return obj


def pod(name: str = "p", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


async def admit(classes: list[dict[str, Any]], obj: dict[str, Any], operation: str = "CREATE",
                pods: FakeStore | None = None) -> dict[str, Any]:
    hook = Priority(FakeStore(CLASSES, classes))  # type: ignore[arg-type]
    target = pods or FakeStore(PODS, [])
    old = target.objects.get(obj["metadata"].get("name", "")) if operation == "UPDATE" else None
    await run_admit(hook, operation, target.info, "default", obj, copy.deepcopy(old))
    return obj


async def test_no_class_and_no_default_gives_zero_and_preempt_lower_priority() -> None:
    spec = (await admit([pc("high", 1000)], pod()))["spec"]
    assert spec["priority"] == 0 and spec["preemptionPolicy"] == "PreemptLowerPriority"
    assert "priorityClassName" not in spec
    # an explicit empty name is the same as none, and Go drops it from the stored object
    assert "priorityClassName" not in (await admit([], pod(priorityClassName="")))["spec"]


async def test_named_class_sets_value_and_its_policy() -> None:
    spec = (await admit([pc("batch", 50, policy="Never")], pod(priorityClassName="batch")))["spec"]
    assert (spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]) == ("batch", 50, "Never")


async def test_global_default_is_named_on_the_pod_and_lowest_wins_a_race() -> None:
    classes = [pc("a", 700, default=True, policy="Never"), pc("b", 300, default=True), pc("c", 5)]
    spec = (await admit(classes, pod()))["spec"]
    assert (spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]) == ("b", 300,
                                                                                      "PreemptLowerPriority")
    assert default_class([pc("x", 1), {"metadata": {"name": "y"}, "value": "9", "globalDefault": True}]) is None


async def test_unknown_class_is_forbidden_with_kubes_message() -> None:
    with pytest.raises(APIError) as err:
        await admit([pc("known", 1)], pod(priorityClassName="nope"))
    assert err.value.code == 403 and err.value.reason == "Forbidden"
    assert err.value.message == 'pods "p" is forbidden: no PriorityClass with name nope was found'
    # a generated name is reported by its prefix
    generated = {"metadata": {"generateName": "web-"}, "spec": {"priorityClassName": "nope"}}
    with pytest.raises(APIError, match='pods "web-" is forbidden'):
        await admit([], generated)


async def test_user_priority_must_match_the_computed_one() -> None:
    with pytest.raises(APIError) as err:
        await admit([], pod(priority=7))
    assert err.value.code == 403
    assert err.value.message == (
        'pods "p" is forbidden: the integer value of priority (7) must not be provided in pod spec; '
        "priority admission controller computed 0 from the given PriorityClass name")
    same = await admit([pc("x", 7)], pod(priorityClassName="x", priority=7))
    assert same["spec"]["priority"] == 7


async def test_user_policy_must_match_the_classes() -> None:
    with pytest.raises(APIError) as err:
        await admit([pc("quiet", 10, policy="Never")], pod(priorityClassName="quiet",
                                                           preemptionPolicy="PreemptLowerPriority"))
    assert err.value.message == (
        'pods "p" is forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) must not be '
        "provided in pod spec; priority admission controller computed Never from the given PriorityClass name")
    # a class without a policy leaves the pod's own alone
    spec: dict[str, Any] = {"priorityClassName": "old", "preemptionPolicy": "Never"}
    assert admit_pod_spec(spec, pc("old", 3, policy=None), named=True) == ""
    assert spec["preemptionPolicy"] == "Never" and spec["priority"] == 3


async def test_malformed_fields_are_left_for_validation() -> None:
    for bad in ({"priority": "high"}, {"priority": True}, {"priorityClassName": 5}, {"preemptionPolicy": 3}):
        obj = pod(**bad)
        before = copy.deepcopy(obj)
        await admit([pc("d", 9, default=True)], obj)
        assert obj == before, bad
    no_spec: dict[str, Any] = {"metadata": {"name": "p"}}
    assert await admit([], no_spec) == {"metadata": {"name": "p"}}


async def test_update_keeps_the_stored_priority_fields() -> None:
    stored = pod(priority=5, preemptionPolicy="Never", priorityClassName="x")
    pods = FakeStore(PODS, [stored])
    new = await admit([], pod(priorityClassName="x"), operation="UPDATE", pods=pods)
    assert new["spec"]["priority"] == 5 and new["spec"]["preemptionPolicy"] == "Never"
    # a stated value is not replaced (validation judges it), and nothing is looked up
    pods.gets.clear()
    changed = await admit([], pod(priority=9, preemptionPolicy="Never"), operation="UPDATE", pods=pods)
    assert changed["spec"]["priority"] == 9 and pods.gets == []
    # an update does not resolve classes: a missing class is not an error there
    kept = await admit([], pod(priorityClassName="gone", priority=1, preemptionPolicy="Never"), operation="UPDATE")
    assert kept["spec"]["priority"] == 1


async def test_only_one_global_default_class() -> None:
    existing = [pc("first", 10, default=True), pc("other", 1)]
    with pytest.raises(APIError) as err:
        await admit(existing, pc("second", 20, default=True), operation="CREATE",
                    pods=FakeStore(CLASSES, []))
    assert err.value.code == 403
    assert err.value.message == ('priorityclasses.scheduling.k8s.io "second" is forbidden: PriorityClass first '
                                 "is already marked as default. Only one default can exist")
    with pytest.raises(APIError, match="already marked as default"):
        await admit(existing, pc("other", 1, default=True), operation="UPDATE", pods=FakeStore(CLASSES, []))
    # the default itself may be updated, non-defaults may be created, deletes are not checked
    await admit(existing, pc("first", 10, default=True), operation="UPDATE", pods=FakeStore(CLASSES, []))
    await admit(existing, pc("third", 30), operation="CREATE", pods=FakeStore(CLASSES, []))
    await admit(existing, pc("fourth", 30, default=True), operation="DELETE", pods=FakeStore(CLASSES, []))
    assert default_conflict("CREATE", pc("n", 1, default=True), None) == ""


def test_system_classes_are_kubes() -> None:
    objs = {o["metadata"]["name"]: o for o in system_priority_class_objects()}
    assert objs["system-node-critical"]["value"] == 2000001000
    assert objs["system-cluster-critical"]["value"] == 2000000000
    assert all(o["apiVersion"] == "scheduling.k8s.io/v1" and o["kind"] == "PriorityClass" and o["description"]
               for o in objs.values())
    assert len(objs) == len(SYSTEM_PRIORITY_CLASSES) == 2
