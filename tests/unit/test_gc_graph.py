"""The garbage collector's graph and the DELETE finalizer policy, without a server."""

from __future__ import annotations

from typing import Any

from coreapi.controllers.garbagecollector_graph import Graph
from genericapi.registry.options import DeleteOptions
from genericapi.registry.store import gc_finalizers


def obj(name: str, uid: str, owners: list[dict[str, Any]] | None = None, *, deleting: bool = False,
        finalizers: list[str] | None = None, ns: str = "ns") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": uid}
    if owners:
        meta["ownerReferences"] = owners
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def owner(uid: str, block: bool = False) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": f"n-{uid}", "uid": uid, "blockOwnerDeletion": block}


def test_unseen_owner_is_virtual_and_verified() -> None:
    g = Graph()
    work = g.observe(obj("child", "c", [owner("p")]))
    node = g.get("p")
    assert node is not None and node.virtual and node.dependents == {"c"}
    assert node.identity.namespace == "ns" and node.identity.name == "n-p"
    assert work.delete == {"p"}  # the virtual owner must be checked against the API
    work = g.observe(obj("n-p", "p"))
    assert not g.get("p").virtual  # type: ignore[union-attr]


def test_owner_deleted_enqueues_dependents_and_unlinks() -> None:
    g = Graph()
    g.observe(obj("p", "p"))
    g.observe(obj("c1", "c1", [owner("p")]))
    g.observe(obj("c2", "c2", [owner("p")]))
    work = g.forget_object(obj("p", "p"))
    assert work.delete == {"c1", "c2"} and g.get("p") is None
    # Forgetting a dependent whose owner is virtual drops the now useless virtual node.
    g.observe(obj("c3", "c3", [owner("v")]))
    g.forget_object(obj("c3", "c3", [owner("v")]))
    assert g.get("v") is None


def test_foreground_and_orphan_transitions() -> None:
    g = Graph()
    g.observe(obj("p", "p"))
    g.observe(obj("c1", "c1", [owner("p", block=True)]))
    g.observe(obj("c2", "c2", [owner("p", block=False)]))
    work = g.observe(obj("p", "p", deleting=True, finalizers=["foregroundDeletion"]))
    assert work.delete == {"p", "c1", "c2"} and not work.orphan
    p = g.get("p")
    assert p is not None and p.deleting_dependents
    assert [d.uid for d in g.blocking_dependents(p)] == ["c1"]
    # The blocking dependent goes: the waiting owner is looked at again.
    assert g.forget_object(obj("c1", "c1", [owner("p", block=True)])).delete == {"p"}
    assert g.blocking_dependents(p) == []
    work = g.observe(obj("q", "q", deleting=True, finalizers=["orphan"]))
    assert work.orphan == {"q"} and not g.get("q").deleting_dependents  # type: ignore[union-attr]


def test_owner_reference_changes() -> None:
    g = Graph()
    g.observe(obj("p", "p", deleting=True, finalizers=["foregroundDeletion"]))
    g.observe(obj("c", "c", [owner("p", block=True)]))
    # Unblocking the reference lets the waiting owner proceed; removing it unlinks.
    assert "p" in g.observe(obj("c", "c", [owner("p", block=False)])).delete
    work = g.observe(obj("c", "c", []))
    assert "p" in work.delete and g.get("p").dependents == set()  # type: ignore[union-attr]
    # A reference without uid can never match: the dependent is looked at.
    assert "bad" in g.observe(obj("bad", "bad", [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x"}])).delete
    # Objects without uid are ignored; unknown deletions are no-ops.
    assert not g.observe(obj("x", "")).delete
    assert not g.forget("nope").delete


def opts(**kw: Any) -> DeleteOptions:
    return DeleteOptions(**kw)


def test_gc_finalizers_follow_kube() -> None:
    assert gc_finalizers([], opts(), "Background") == []
    assert gc_finalizers([], opts(), "Orphan") == ["orphan"]  # batch/v1 Jobs
    assert gc_finalizers([], opts(propagation_policy="Background"), "Orphan") == []
    assert gc_finalizers([], opts(propagation_policy="Foreground"), "Background") == ["foregroundDeletion"]
    assert gc_finalizers(["a"], opts(propagation_policy="Orphan"), "Background") == ["a", "orphan"]
    assert gc_finalizers([], opts(orphan_dependents=True), "Background") == ["orphan"]
    assert gc_finalizers([], opts(orphan_dependents=False), "Background") == ["foregroundDeletion"]
    # Switching policy on an object already being deleted replaces the finalizer.
    assert gc_finalizers(["foregroundDeletion"], opts(propagation_policy="Orphan"), "Background") == ["orphan"]
    # No option: a finalizer already there stays (it overrides the default).
    assert gc_finalizers(["foregroundDeletion"], opts(), "Orphan") == ["foregroundDeletion"]
    assert gc_finalizers(["x", "orphan"], opts(), "Background") == ["x", "orphan"]
