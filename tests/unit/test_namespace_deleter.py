"""The namespace deleter and conditions, and the Namespace strategies, with in-test fakes."""

from __future__ import annotations

from typing import Any

import pytest
from coreapi.controllers.namespace import ConditionUpdater, ContentTotals, NamespaceDeleter, deletable_namespaced
from coreapi.namespaces import NamespaceFinalizeStrategy, NamespaceStrategy, validate_finalizer_name
from genericapi.apimachinery.errors import APIError
from genericapi.controllers import APIResource

ALL = frozenset({"list", "delete", "get", "watch"})


def res(group: str, plural: str, namespaced: bool = True, verbs: frozenset[str] = ALL) -> APIResource:
    return APIResource(group, "v1", plural, plural.capitalize(), namespaced, verbs)


class FakeClient:
    """A resource's objects in memory; deletes drop objects unless they carry finalizers."""

    def __init__(self, resource: APIResource, items: list[dict[str, Any]], log: list[Any]) -> None:
        self.resource = resource
        self.items = items
        self.log = log

    async def list(self, namespace: str = "", **_kw: Any) -> tuple[list[dict[str, Any]], str, str]:
        return [o for o in self.items if o["metadata"].get("namespace", "") in ("", namespace)], "1", ""

    async def delete(self, namespace: str, name: str, **kw: Any) -> dict[str, Any] | None:
        self.log.append((self.resource.plural, name, kw.get("propagation_policy"), kw.get("grace_period_seconds")))
        for o in self.items:
            if o["metadata"]["name"] == name:
                if o["metadata"].get("finalizers"):
                    o["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
                    return o
                if o["metadata"].get("fail"):
                    raise APIError(500, "InternalError", "boom")
                self.items.remove(o)
                return None
        raise APIError(404, "NotFound", "gone")


class FakeClients:
    def __init__(self, content: dict[str, list[dict[str, Any]]], extra: list[APIResource] = ()) -> None:  # type: ignore[assignment]
        self.log: list[Any] = []
        self._clients = {p: FakeClient(res("", p, p != "nodes"), items, self.log) for p, items in content.items()}
        self._extra = list(extra)
        self.refreshed = 0
        self.discovery_error: APIError | None = None

    async def refresh(self) -> bool:
        self.refreshed += 1
        if self.discovery_error is not None:
            raise self.discovery_error
        return False

    def resources(self) -> list[APIResource]:
        return [c.resource for c in self._clients.values()] + self._extra

    def client(self, group: str, plural: str, version: str = "") -> FakeClient:
        return self._clients[plural]


def o(name: str, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", **meta}}


def test_deletable_resources_pods_first() -> None:
    found = deletable_namespaced([res("apps", "deployments"), res("", "nodes", namespaced=False),
                                  res("", "configmaps"), res("", "pods"), res("x", "ro", verbs=frozenset({"list"}))])
    assert [r.plural for r in found] == ["pods", "configmaps", "deployments"]


async def test_pods_first_then_everything_and_remaining_counts() -> None:
    clients = FakeClients({"pods": [o("p1"), o("held", finalizers=["example.com/x"])],
                           "configmaps": [o("c1"), o("c2")], "nodes": []})
    deleter = NamespaceDeleter(clients)  # type: ignore[arg-type]
    cond = ConditionUpdater()
    totals = await deleter.delete_content("ns", cond)
    # A pod held by a finalizer stops the pass before other kinds (OrderedNamespaceDeletion).
    assert totals.remaining == {("", "pods"): 1} and totals.finalizers == {"example.com/x": 1}
    assert all(entry[0] == "pods" for entry in clients.log)
    assert all(entry[2] == "Background" for entry in clients.log)
    clients._clients["pods"].items.clear()
    totals = await deleter.delete_content("ns", ConditionUpdater())
    assert totals.remaining == {} and clients._clients["configmaps"].items == []


async def test_bound_pods_are_forced_when_their_node_is_missing() -> None:
    clients = FakeClients({"pods": [o("free"), {**o("bound"), "spec": {"nodeName": "n1"}},
                                    {**o("on-real"), "spec": {"nodeName": "real"}}],
                           "nodes": [{"metadata": {"name": "real"}}]})
    await NamespaceDeleter(clients).delete_content("ns", ConditionUpdater())  # type: ignore[arg-type]
    grace = {name: g for plural, name, _p, g in clients.log if plural == "pods"}
    assert grace == {"free": None, "bound": 0, "on-real": None}


async def test_objects_stranded_by_a_crash_between_mark_and_remove_are_deleted_again() -> None:
    marked = {"deletionTimestamp": "2025-01-01T00:00:00Z"}
    clients = FakeClients({
        "pods": [o("stranded-pod", **marked, deletionGracePeriodSeconds=0),
                 {**o("graceful", deletionTimestamp="2999-01-01T00:00:00Z", deletionGracePeriodSeconds=30),
                  "spec": {"nodeName": "real"}}],
        "configmaps": [o("stranded-cm", **marked), o("held", **marked, finalizers=["example.com/x"])],
        "nodes": [{"metadata": {"name": "real", "namespace": ""}}]})
    deleter = NamespaceDeleter(clients)  # type: ignore[arg-type]
    totals = await deleter.delete_content("ns", ConditionUpdater())
    assert [name for _p, name, _pp, _g in clients.log] == ["stranded-pod"]  # the graceful pod waits
    assert totals.remaining == {("", "pods"): 1}
    clients._clients["pods"].items.clear()
    totals = await deleter.delete_content("ns", ConditionUpdater())
    assert [name for _p, name, _pp, _g in clients.log][1:] == ["stranded-cm"]  # the held one waits
    assert totals.remaining == {("", "configmaps"): 1} and totals.finalizers == {"example.com/x": 1}


def test_conditions_as_kube_words_them() -> None:
    cond = ConditionUpdater()
    cond.content_totals(ContentTotals({("", "configmaps"): 2, ("apps", "deployments"): 1}, {"a/b": 3}))
    cond.delete_content_failed("secrets.: boom")
    ns: dict[str, Any] = {"status": {"phase": "Terminating"}}
    assert cond.apply(ns, now="2025-01-01T00:00:00Z")
    by_type = {c["type"]: c for c in ns["status"]["conditions"]}
    assert [c["type"] for c in ns["status"]["conditions"]] == [
        "NamespaceDeletionDiscoveryFailure", "NamespaceDeletionGroupVersionParsingFailure",
        "NamespaceDeletionContentFailure", "NamespaceContentRemaining", "NamespaceFinalizersRemaining"]
    assert by_type["NamespaceContentRemaining"]["message"] == \
        "Some resources are remaining: configmaps. has 2 resource instances, deployments.apps has 1 resource instances"
    assert by_type["NamespaceFinalizersRemaining"] == {
        "type": "NamespaceFinalizersRemaining", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z",
        "reason": "SomeFinalizerRemain", "message": "Some finalizers are remaining: a/b in 3 resource instances"}
    assert by_type["NamespaceDeletionContentFailure"]["message"] == \
        "Failed to delete all resource types, 1 remaining: secrets.: boom"
    assert by_type["NamespaceDeletionDiscoveryFailure"]["status"] == "False"
    # The same outcome again changes nothing; success flips the status and the transition time.
    again = ConditionUpdater()
    again.content_totals(ContentTotals({("", "configmaps"): 2, ("apps", "deployments"): 1}, {"a/b": 3}))
    again.delete_content_failed("secrets.: boom")
    assert not again.apply(ns, now="2025-01-02T00:00:00Z")
    assert ConditionUpdater().apply(ns, now="2025-01-03T00:00:00Z")
    done = {c["type"]: c for c in ns["status"]["conditions"]}["NamespaceContentRemaining"]
    assert (done["status"], done["reason"], done["lastTransitionTime"]) == ("False", "ContentRemoved",
                                                                            "2025-01-03T00:00:00Z")


async def test_failed_delete_is_a_content_failure() -> None:
    clients = FakeClients({"configmaps": [o("bad", fail=True)], "nodes": []})
    cond = ConditionUpdater()
    await NamespaceDeleter(clients).delete_content("ns", cond)  # type: ignore[arg-type]
    assert cond.content_errors == ["configmaps.: boom"]


async def test_every_pass_rediscovers_and_a_failed_discovery_is_a_condition() -> None:
    clients = FakeClients({"configmaps": [o("c1")], "nodes": []})
    clients.discovery_error = APIError(503, "ServiceUnavailable", "the delegate is unavailable: refused")
    cond = ConditionUpdater()
    totals = await NamespaceDeleter(clients).delete_content("ns", cond)  # type: ignore[arg-type]
    # What is known still goes; the failure is recorded (and holds the namespace's finalization).
    assert clients.refreshed == 1 and clients.log == [("configmaps", "c1", "Background", None)]
    assert not totals.remaining
    assert cond.failed["NamespaceDeletionDiscoveryFailure"] == (
        "DiscoveryFailed", "the delegate is unavailable: refused")
    clients.discovery_error = None
    again = ConditionUpdater()
    await NamespaceDeleter(clients).delete_content("ns", again)  # type: ignore[arg-type]
    assert clients.refreshed == 2 and not again.failed


def test_finalizer_names() -> None:
    assert validate_finalizer_name("kubernetes", "p") == []
    assert validate_finalizer_name("example.com/x", "p") == []
    [err] = validate_finalizer_name("foo", "spec.finalizers[0]")
    assert err.field == "spec.finalizers[0]" and "neither a standard finalizer name" in err.detail
    assert validate_finalizer_name("bad name/", "p")


@pytest.fixture
def ns_info() -> Any:
    from coreapi import catalog

    return next(i for i in catalog.BUILTIN_RESOURCES if i.plural == "namespaces")


def test_strategies_guard_spec_finalizers(ns_info: Any) -> None:
    strategy = NamespaceStrategy(ns_info, None)
    created: dict[str, Any] = {"metadata": {"name": "a"}, "status": {"phase": "Terminating"}}
    strategy.prepare_for_create(created)
    assert created["spec"]["finalizers"] == ["kubernetes"] and created["status"] == {"phase": "Active"}
    old = {"metadata": {"name": "a"}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
    new: dict[str, Any] = {"metadata": {"name": "a"}, "spec": {"finalizers": []}, "status": {"phase": "x"}}
    strategy.prepare_for_update(new, old)
    assert new["spec"]["finalizers"] == ["kubernetes"] and new["status"] == {"phase": "Active"}
    fin = NamespaceFinalizeStrategy(ns_info, None)
    new = {"metadata": {"name": "a"}, "spec": {"finalizers": []}, "status": {"phase": "x"}}
    fin.prepare_for_update(new, old)
    assert new["spec"]["finalizers"] == [] and new["status"] == {"phase": "Active"}
    off = NamespaceStrategy(ns_info, None, add_kubernetes_finalizer=False)
    plain: dict[str, Any] = {"metadata": {"name": "b"}}
    off.prepare_for_create(plain)
    assert "spec" not in plain
